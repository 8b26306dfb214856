"""raftlock.Lock: a lock handle (raftlock_lock), an owner of one lock name.

Acquiring twice through one handle nests (same token, two releases);
another handle, even in the same thread, is another owner.
"""

import contextlib
import ctypes
import threading
import time
import traceback

from . import _native, _waits
from ._guard import Guard
from ._args import LOCK_DELAY_MAX_MS, UINT_MAX, c_string, integer, milliseconds
from .errors import Code, Canceled, LockBusy, LockRevoked, RaftlockError, error_for, strerror

_DEFAULT = object()


def timeout_ms(seconds):
    """Seconds (None: wait without end) as the library's timeout_ms."""
    if seconds is None:
        return -1
    if not seconds >= 0:  # NaN too
        raise error_for(Code.EINVAL, "timeout must be None or at least 0")
    if seconds == 0:
        return 0
    return max(1, int(min(seconds * 1000, 2**31 - 1)))


class Lock:
    """A handle on one lock name in one session; made by Session.lock(),
    read_lock(), write_lock(), semaphore() or try_lock().

    In a `with` block it is acquired on entry with the options it was made
    with (LockNotAcquired or another RaftlockError when not taken: the
    block does not run), released on exit and then freed. A block whose
    grant the cluster revoked while it ran (raftlock revoke, a maximum hold
    time) raises LockRevoked at its end; one whose session was lost raises
    the session's error (SessionLost, ...); neither replaces an exception
    of the block itself.
    """

    def __init__(self, session, session_ptr, name, kind, limit, lock_delay, *, timeout=None,
                 mode=_native.EXCLUSIVE, permits=1):
        self.session = session
        self.name = name
        self._timeout = timeout
        self._mode = mode
        self._permits = integer(permits, f"lock '{name}': permits", 0, UINT_MAX)
        opts = _native.LockOptions(
            kind=kind, limit=integer(limit, f"lock '{name}': limit", 0, UINT_MAX),
            lock_delay_ms=milliseconds(lock_delay or 0, f"lock '{name}': lock_delay",
                                       LOCK_DELAY_MAX_MS))
        ptr = ctypes.c_void_p()
        self._client = session.client
        # The token of the grant this handle was last given, while the
        # caller has not released it: a token 0 then means revoked.
        self._granted = 0
        self._client._check(_native.lock_new(session_ptr, c_string(name, "lock name"),
                                             ctypes.byref(opts), ctypes.byref(ptr)))
        self._guard = Guard(ptr.value, lambda: Canceled(
            Code.ECANCELED, f"lock '{self.name}': its handle or session is closed"))
        # The waiting acquires of this handle whose caller still waits.
        self._waits_mu = threading.Lock()
        self._waits = set()
        # closed while waits were unsettled: the last to settle frees it
        self._free_when_settled = False

    @contextlib.contextmanager
    def _use(self):
        """The handle, alive (with its session) until the block ends."""
        with self._guard.use() as ptr, self.session._guard.use():
            yield ptr

    def _freed_with_session(self):
        self._guard.abandon()

    @property
    def token(self):
        """The fencing token of the current grant; 0 when this handle holds
        nothing (never acquired, released, or its session lost)."""
        try:
            with self._use() as ptr:
                return _native.lock_token(ptr)
        except RaftlockError:  # closed
            return 0

    @property
    def held(self):
        return self.token != 0

    def acquire(self, timeout=_DEFAULT, mode=None, permits=None):
        """Takes the lock, waiting in the cluster's FIFO queue up to
        `timeout` seconds (None: until granted or the session ends; 0: not
        at all). Returns the fencing token. Raises LockTimeout, LockBusy
        (timeout 0) or another RaftlockError: then this handle holds
        nothing new.

        With a timeout it ends when the cluster ends the wait at its
        deadline (LockTimeout), or, the cluster unheard (unreachable,
        failing over), within the timeout plus the client's
        request_timeout: it raises AcquireOutcomeUnknown then, and a grant
        that comes later is released. (The library's blocking call ends
        sooner, cancelling its wait; this wait cannot cancel, and giving up
        before the cluster could end it would call a plain timeout
        unknown.)"""
        t = timeout_ms(self._timeout if timeout is _DEFAULT else timeout)
        mode = self._mode if mode is None else mode
        permits = self._permits_arg(permits)
        if t != 0:
            self._granted = self._wait_for_grant(mode, permits, t)
            return self._granted
        token = ctypes.c_uint64()
        with self._use() as ptr:
            rv = _native.lock_acquire(ptr, mode, permits, 0, ctypes.byref(token))
            self._client._check(rv, acquiring=True)
        self._granted = token.value
        return token.value

    def _wait_for_grant(self, mode, permits, t):
        """An acquire that waits: sent within a short use of the handle, so
        that no close waits long nor frees the handle under the call; the
        wait itself is outside (_waits.py). A close of the session ends
        it with Canceled, so does a close of the handle."""
        start = time.monotonic()
        while True:
            left = t if t < 0 else t - int((time.monotonic() - start) * 1000)
            if t > 0 and left <= 0:
                raise error_for(Code.ETIMEDOUT, f"acquire '{self.name}': "
                                f"{strerror(Code.ETIMEDOUT)}", True)  # nothing was sent
            wait = self._send_wait(mode, permits, left,
                                   time.monotonic() - start < self._client._request_timeout)
            if wait is not None:
                break
            time.sleep(0.02)
        give_up = None if t < 0 else start + t / 1000 + self._give_up_bound() - time.monotonic()
        status, token, message = wait.wait(give_up)
        if status != 0:
            raise error_for(status, message or f"acquire '{self.name}': {strerror(status)}", True)
        return token

    def _send_wait(self, mode, permits, t, may_retry):
        """The Wait of a sent acquire; None: not sent, as an earlier request
        of the handle whose outcome was unknown is still being sent (a
        blocking call would wait for it up to the request timeout: so does
        the caller, calling again)."""
        wait = _waits.Wait(self._client._message, self._answer_nobody_takes, self._wait_settled)
        with self._use() as ptr:
            with self._waits_mu:
                self._waits.add(wait)
            rv = _waits.submit(ptr, mode, permits, t, wait)
            if rv != 0:
                with self._waits_mu:
                    self._waits.discard(wait)
                if rv == Code.ESTATE and may_retry:
                    return None
                self._client._check(rv, acquiring=True)
        return wait

    def _give_up_bound(self):
        """How long past its timeout a waiting acquire waits for its answer:
        the library's own limit (the request timeout) ends it first, with
        its message; this second more is for the callback to run."""
        return self._client._request_timeout + 1.0

    def _answer_nobody_takes(self, ptr, status, settle):
        """The I/O thread: the answer of a wait that its caller left
        (given up, interrupted, or the handle closed): a grant is
        released, then the wait settled."""
        try:
            if status == 0:
                _waits.release_then(ptr, settle)
            else:
                settle(ptr)
        except Exception:  # noqa: BLE001 - a bug here must not reach the library
            traceback.print_exc()

    def _wait_settled(self, wait, ptr):
        """The library calls back no more for `wait`: a close finds it no
        longer, and the handle, if closed meanwhile and this was the last
        wait the library owed an answer, is freed now (unless its session
        freed it). Two may be owed at once: a late grant's release, and an
        acquire sent meanwhile."""
        with self._waits_mu:
            self._waits.discard(wait)
            free = self._free_when_settled and not self._waits
            if free:
                self._free_when_settled = False
        if free:
            self.session._forget_lock(self, lambda: _native.lock_free(ptr))

    def _permits_arg(self, permits):
        return integer(self._permits if permits is None else permits,
                       f"acquire '{self.name}': permits", 0, UINT_MAX)

    def try_acquire(self):
        """Takes the lock if it is free now: its token, or None when another
        owner holds it. Other failures raise."""
        try:
            return self.acquire(timeout=0)
        except LockBusy:
            return None

    def release(self):
        """Releases one level of nesting (all permits for a semaphore);
        returns the levels still held (0: the lock is free for others)."""
        left = ctypes.c_uint32()
        with self._use() as ptr:
            rv = _native.lock_release(ptr, ctypes.byref(left))
            if rv == Code.ENOTHOLDER and self._granted:
                raise self._revoked()
            if rv == Code.EUNKNOWN:
                self._release_failed(_native.lock_token(ptr))
            self._client._check(rv)
        return self._released(left.value)

    def _release_failed(self, token):
        """A release whose outcome is unknown leaves the handle holding
        nothing (token 0): that is not a revocation, and the block's end
        must not say so. (A lost session is told as such at the block's
        end; other failures sent nothing.)"""
        if token == 0:
            self._granted = 0

    def _released(self, left):
        if left == 0:
            self._granted = 0
        return left

    def _revoked(self):
        """The error of a grant the cluster revoked from under the caller."""
        token, self._granted = self._granted, 0
        return LockRevoked(Code.ENOTHOLDER,
                           f"lock '{self.name}': the grant of token {token} was revoked")

    def close(self):
        """Frees the handle (a held lock stays held until its session
        ends: release first). Idempotent. Waits for the calls of other
        threads on this handle that are under way, which are short: do
        not call it from an event callback. An acquire of another thread
        that waits ends at once with Canceled; the library's answer to it
        comes later, and then the handle is freed (a late grant released
        first)."""
        ptr = self._guard.close()
        if ptr is None:
            return
        with self._waits_mu:
            waits = list(self._waits)
            self._free_when_settled = bool(waits)
        for wait in waits:
            wait.abandon()
        if not waits:
            self.session._forget_lock(self, lambda: _native.lock_free(ptr))

    def __enter__(self):
        try:
            self.acquire()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        with self._block_end(exc_type):
            if self.held:
                self.release()

    @contextlib.contextmanager
    def _block_end(self, exc_type):
        """Around the release at the end of a `with` block: a session lost
        while the block ran is raised (it ran without the lock for part of
        its time), but never in place of the block's own exception; the
        handle is freed. So is a grant revoked while the block ran, unless
        the block released it itself."""
        try:
            open_ = self._guard.ptr is not None
            lost = open_ and not self.held and self.session.lost
            revoked = not lost and open_ and self._granted and not self.held
            yield
            if lost:
                raise self.session.lost_error or error_for(Code.ESESSION)
            if revoked:
                raise self._revoked()
        except RaftlockError:
            if exc_type is None:
                raise
        finally:
            self.close()

    def __repr__(self):
        return f"<raftlock.Lock {self.name!r} token={self.token}>"
