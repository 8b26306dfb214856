"""raftlock.Session: a lease on the cluster through which locks are held."""

import ctypes
import enum
import threading
import traceback

from . import _native
from ._guard import Guard
from ._args import TTL_MAX_MS, TTL_MIN_MS, UINT_MAX, integer, milliseconds
from .errors import Code, RaftlockError, StateError, error_for
from .aio import AsyncLock
from .lock import Lock


class SessionEvent(enum.IntEnum):
    """The changes of a session's state (raftlock.h, enum raftlock_session_event)."""
    JEOPARDY = _native.SESSION_JEOPARDY  # validity ran out; the library still renews
    SAFE = _native.SESSION_SAFE  # a keepalive was acknowledged: valid again
    LOST = _native.SESSION_LOST  # for good: its locks are not this client's any more
    # (the cluster frees them when it expires the session, which may be a
    # little later when the grace period ran out unanswered)


class Session:
    """A session of a Client; made by Client.session(), closed by close()
    or at the end of a `with` block (which releases all its locks).

    Its locks are the caller's only while the session is valid: after a
    JEOPARDY event or once it is lost, stop acting on them.
    """

    def __init__(self, client, ttl, grace, on_lost, on_event):
        self._client = client
        self._on_lost = on_lost
        self._on_event = on_event
        self._lost = threading.Event()
        self.lost_error = None  # the RaftlockError it was lost with
        self._callback_thread = None
        # The C callbacks must stay alive while the library may call them:
        # until the session is closed.
        self._c_lost = _native.SESSION_LOST_CB(self._lost_cb)
        self._c_event = _native.SESSION_EVENT_CB(self._event_cb)
        opts = _native.SessionOptions(
            ttl_ms=milliseconds(ttl, "open session: ttl", TTL_MAX_MS, TTL_MIN_MS),
            on_lost=self._c_lost,
            grace_ms=milliseconds(grace, "open session: grace", UINT_MAX, 1),
            on_event=self._c_event)
        ptr = ctypes.c_void_p()
        with client._guard.use() as client_ptr:
            client._check(_native.session_open(client_ptr, ctypes.byref(opts),
                                               ctypes.byref(ptr)))
        self.id = _native.session_id(ptr.value)
        self._guard = Guard(ptr.value,
                            lambda: StateError(Code.ESTATE, f"session {self.id} is closed"))
        # Handles of this session: the library frees them with it.
        self._mu = threading.Lock()
        self._locks = set()

    # -- callbacks, on the client's keepalive thread ----------------------

    def _lost_cb(self, _session, reason, _arg):
        self.lost_error = error_for(reason, f"session {self.id} lost: "
                                    f"{error_for(reason).args[0]}")
        self._lost.set()
        self._run_callback(self._on_lost, self, self.lost_error)

    def _event_cb(self, _session, event, reason, _arg):
        error = error_for(reason) if reason != 0 else None
        self._run_callback(self._on_event, self, SessionEvent(event), error)

    def _run_callback(self, fn, *args):
        if fn is None:
            return
        # The library runs one callback of a client at a time.
        self._callback_thread = self._client._callback_thread = threading.get_ident()
        try:
            fn(*args)
        except Exception:  # a callback's bug must not reach the library
            traceback.print_exc()
        finally:
            self._callback_thread = self._client._callback_thread = None

    # -- state --------------------------------------------------------------

    @property
    def client(self):
        return self._client

    @property
    def valid(self):
        """True while the lease is certainly valid (raftlock_session_valid)."""
        try:
            with self._guard.use() as ptr:
                return _native.session_valid(ptr)
        except RaftlockError:  # closed
            return False

    @property
    def valid_until_ms(self):
        """Until when the lease is certainly valid, in ms of CLOCK_BOOTTIME
        (compare with raftlock.now_ms()); 0 once lost."""
        try:
            with self._guard.use() as ptr:
                return _native.session_valid_until(ptr)
        except RaftlockError:  # closed
            return 0

    @property
    def lost(self):
        """True once the session is lost for good (or closed)."""
        return self._lost.is_set() or self._guard.ptr is None

    def wait_lost(self, timeout=None):
        """Blocks until the session is lost; True if it was within timeout."""
        return self._lost.wait(timeout)

    # -- locks ---------------------------------------------------------------

    def _new_lock(self, cls, name, kind, limit, lock_delay, **acquire_defaults):
        if kind == _native.SEMAPHORE:
            integer(limit, f"semaphore '{name}': limit", 1, UINT_MAX)
        with self._mu, self._guard.use() as ptr:
            lock = cls(self, ptr, name, kind, limit, lock_delay, **acquire_defaults)
            self._locks.add(lock)
        return lock

    def _forget_lock(self, lock, free):
        """Frees a lock handle unless the session already freed it."""
        with self._mu:
            if lock in self._locks:
                self._locks.discard(lock)
                free()

    def lock(self, name, timeout=None, *, lock_delay=0):
        """An exclusive lock on `name`. Used in a `with` block it is
        acquired on entry (waiting up to `timeout` seconds, None: until
        granted or the session ends; 0: not at all) and released on exit;
        the block gets the Lock, whose .token is the fencing token.
        lock_delay (seconds, at most 600) keeps the lock unavailable that
        long after a holder's session expires (set by the lock's creator).
        A number out of range raises InvalidArgument."""
        return self._new_lock(Lock, name, _native.MUTEX, 0, lock_delay, timeout=timeout)

    def try_lock(self, name, *, lock_delay=0):
        """As lock(name, timeout=0): raises LockBusy at once when held."""
        return self.lock(name, timeout=0, lock_delay=lock_delay)

    def read_lock(self, name, timeout=None, *, lock_delay=0):
        """The shared side of the read-write lock `name`."""
        return self._new_lock(Lock, name, _native.RWLOCK, 0, lock_delay, timeout=timeout,
                              mode=_native.SHARED)

    def write_lock(self, name, timeout=None, *, lock_delay=0):
        """The exclusive side of the read-write lock `name`."""
        return self._new_lock(Lock, name, _native.RWLOCK, 0, lock_delay, timeout=timeout,
                              mode=_native.EXCLUSIVE)

    def semaphore(self, name, limit, permits=1, timeout=None, *, lock_delay=0):
        """`permits` of the `limit` permits of the semaphore `name` (every
        user of the name must give the same limit: else KindMismatch)."""
        return self._new_lock(Lock, name, _native.SEMAPHORE, limit, lock_delay,
                              timeout=timeout, permits=permits)

    # asyncio: the same, as AsyncLock (`async with`; see raftlock.aio).

    def lock_async(self, name, timeout=None, *, lock_delay=0):
        """`async with session.lock_async(name) as lock:` as lock()."""
        return self._new_lock(AsyncLock, name, _native.MUTEX, 0, lock_delay, timeout=timeout)

    def read_lock_async(self, name, timeout=None, *, lock_delay=0):
        return self._new_lock(AsyncLock, name, _native.RWLOCK, 0, lock_delay, timeout=timeout,
                              mode=_native.SHARED)

    def write_lock_async(self, name, timeout=None, *, lock_delay=0):
        return self._new_lock(AsyncLock, name, _native.RWLOCK, 0, lock_delay, timeout=timeout,
                              mode=_native.EXCLUSIVE)

    def semaphore_async(self, name, limit, permits=1, timeout=None, *, lock_delay=0):
        return self._new_lock(AsyncLock, name, _native.SEMAPHORE, limit, lock_delay,
                              timeout=timeout, permits=permits)

    # -- life -----------------------------------------------------------------

    def close(self):
        """Closes the session on the cluster (its locks are released, its
        waits canceled) and frees it with its lock handles, once the calls
        of other threads on it are over (a waiting acquire ends with
        Canceled); later calls raise. Must not be called from this
        session's own callbacks. Idempotent."""
        if self._callback_thread == threading.get_ident():
            raise StateError(Code.ESTATE, f"session {self.id}: close from its own callback")
        ptr = self._guard.close()  # waits for the calls of other threads
        if ptr is None:
            return
        with self._mu:
            for lock in self._locks:
                lock._freed_with_session()
            self._locks.clear()
        # Waiting acquires of other threads end with ECANCELED: the library
        # runs their callbacks before it frees the handles with the session.
        rv = _native.session_close(ptr)
        self._lost.set()
        self._client._forget(self)
        if rv != 0:
            raise error_for(rv, f"close session {self.id}: {error_for(rv).args[0]}")

    def close_quietly(self):
        """close(), swallowing the error of the close request (the cluster
        expires a session it never heard closing)."""
        try:
            self.close()
        except Exception:  # noqa: BLE001 - best effort by contract
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._guard.ptr is None else ("lost" if self.lost else "open")
        return f"<raftlock.Session {self.id} {state}>"
