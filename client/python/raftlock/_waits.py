"""A blocking acquire that waits, built on the library's asynchronous one.

A thread that sat inside raftlock_lock_acquire() for the whole wait would
hold the handle where no close could wait for it, and a close that did not
wait freed the handle under a thread about to call in (between the guard's
use and the call). Here the thread is in the library only to send the
request (a short, counted use of the guard, which close waits for), then
waits on an Event outside it. The library ends the wait with one callback
on its I/O thread: the answer, or RAFTLOCK_ECANCELED when the session
closes (raftlock_session_close runs the callbacks before it frees). A
Lock.close() during the wait wakes the waiter at once and leaves the
handle to the callback, which releases a grant nobody takes any more and
frees the handle (the library allows it there: lock.c,
lock_async_callback). A waiter that gives up (the blocking call's bound,
an interrupt) leaves the same way: until the callback, and the release
of a grant after it, have run, a close finds the wait and leaves the
handle to them.
"""

import threading

from . import _native, _pending
from .errors import Code, message_in_callback


class Wait:
    """One waiting acquire: its answer, once the callback or a close gave it."""

    def __init__(self, message_of_failure, on_abandoned, on_settled):
        self._done = threading.Event()
        self._mu = threading.Lock()
        self._settled = False  # the library calls back no more for this wait
        self._abandoned = False  # nobody takes the answer any more
        # () -> the library's message of a failure, read in its callback
        self._message_of_failure = message_of_failure
        # (lock ptr, status, settle): the answer nobody takes; settle(lock
        # ptr) once the library is done with it (a grant released)
        self._on_abandoned = on_abandoned
        self._on_settled = on_settled  # (wait, lock ptr)
        self.status = None
        self.value = 0
        self.message = None

    def wait(self, timeout=None):
        """(status, token, message) once answered, or after timeout seconds
        (None: no end) as EUNKNOWN: then, as when interrupted (a signal's
        exception), the wait is abandoned and a grant that comes later is
        released."""
        try:
            answered = self._done.wait(timeout)
        except BaseException:
            self.abandon()
            raise
        if not answered:
            self.abandon(status=Code.EUNKNOWN)
        return self.status, self.value, self.message

    def abandon(self, status=Code.ECANCELED):
        """Ends the wait for the caller at once (with status) unless it
        was answered; the library still calls back for it, and on_settled
        runs once it is done."""
        with self._mu:
            if self._settled:
                return
            self._abandoned = True
            if self.status is None:
                self.status = status
        self._done.set()

    def _answer(self, lock_ptr, status, value):
        message = message_in_callback(status, self._message_of_failure)
        with self._mu:
            abandoned = self._abandoned
            if not abandoned:
                self.status, self.value, self.message = status, value, message
                self._settled = True
        self._done.set()
        if abandoned:
            self._on_abandoned(lock_ptr, status, self._settle)
        else:
            self._on_settled(self, lock_ptr)

    def _settle(self, lock_ptr):
        """The answer nobody took is dealt with: the library is done."""
        with self._mu:
            self._settled = True
        self._on_settled(self, lock_ptr)


# The callbacks live as long as the module, so no library callback finds
# them freed; what each is given waits for it in _pending.
@_native.LOCK_CB
def _on_answer(lock_ptr, status, value, arg):
    """The library's I/O thread: hand the answer over and return."""
    wait = _pending.take(arg)
    wait._answer(lock_ptr, status, value)


@_native.LOCK_CB
def _on_release_then_free(lock_ptr, _status, _value, arg):
    free = _pending.take(arg)
    free(lock_ptr)


def submit(lock_ptr, mode, permits, timeout_ms, wait):
    """Sends the acquire (lock_ptr must stay alive during the call): 0 and
    the callback will answer `wait`, or the library's error (no callback)."""
    return _pending.send(wait, _native.lock_acquire_async, lock_ptr, mode, permits, timeout_ms,
                         _on_answer)


def release_then(lock_ptr, then):
    """From a callback: releases the grant of lock_ptr, then calls
    then(lock_ptr) (at once when the release cannot be sent: the
    session is closing or lost, and releases it anyway)."""
    if _pending.send(then, _native.lock_release_async, lock_ptr, _on_release_then_free) != 0:
        then(lock_ptr)
