"""asyncio on libraftlock's asynchronous calls.

raftlock_lock_acquire_async and raftlock_lock_release_async only send the
request; the library calls back once, on its I/O thread, when the cluster
answers (a grant is pushed: nothing polls). The callback here does no more
than hand the result to the waiting coroutine's event loop with
loop.call_soon_threadsafe, so a thousand waiters cost a thousand futures,
not a thousand threads.

    async with session.lock_async("jobs/nightly", timeout=30) as lock:
        await run(lock.token)
"""

import asyncio

from . import _native, _pending
from .errors import NotHolder, OutcomeUnknown, error_for, message_in_callback, strerror
from .lock import _DEFAULT, Lock, timeout_ms


def _settle(fut, status, value, message):
    if not fut.done():
        fut.set_result((status, value, message))


@_native.LOCK_CB
def _on_done(_lock, status, value, arg):
    """The library's I/O thread: hand over to the loop and return at once.
    A failure's message is this thread's until its next failure: it is
    read here, before returning, and travels with the outcome."""
    loop, fut, message_of_failure = _pending.take(arg)
    message = message_in_callback(status, message_of_failure)
    try:
        loop.call_soon_threadsafe(_settle, fut, status, value, message)
    except RuntimeError:  # the loop is closed: nobody waits any more
        pass


def _submit(submit, ptr, message_of_failure, *args):
    """Submits one asynchronous call: (0, future of (status, value,
    message)), or (error, None) when the library refused it (its callback
    never runs). message_of_failure() gives the library's message of a
    failed status, called in the callback."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    rv = _pending.send((loop, fut, message_of_failure), submit, ptr, *args, _on_done)
    if rv != 0:
        return rv, None
    return 0, fut


class AsyncLock(Lock):
    """A Lock whose acquire and release are coroutines; made by
    Session.lock_async(), read_lock_async(), write_lock_async() or
    semaphore_async(), used with `async with`.

    The handle stays alive while a call of it is in flight (the library
    calls back into it): close() then returns at once, and the handle is
    freed when that call ends.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._inflight = 0
        self._close_when_idle = False

    async def _run(self, what, submit, *args, acquiring=False):
        with self._use() as ptr:
            rv, fut = _submit(submit, ptr, self.session.client._message, *args)
            if rv != 0:
                # refused in this thread: the library's message says why
                raise error_for(rv, self.session.client._message(), acquiring)
        self._inflight += 1
        # One callback ends the call: a grant nobody awaits any more is
        # released before the call stops counting as in flight, so that a
        # close() deferred to the end of the call waits for that release.
        call = {"ended": False, "abandoned": False}

        def ended(f):
            call["ended"] = True
            if call["abandoned"]:
                self._release_late_grant(f)
            self._call_ended()

        fut.add_done_callback(ended)
        try:
            status, value, message = await asyncio.shield(fut)
        except asyncio.CancelledError:
            if what == "acquire":
                call["abandoned"] = True
                if call["ended"]:  # the answer came as the task was cancelled
                    self._release_late_grant(fut)
            raise
        if status != 0:
            raise error_for(status, message or f"{what} '{self.name}': {strerror(status)}",
                            acquiring)
        return value

    def _call_ended(self):
        self._inflight -= 1
        if self._inflight == 0 and self._close_when_idle:
            super().close()

    def _release_late_grant(self, fut):
        if fut.cancelled() or fut.result()[0] != 0:
            return  # not granted
        try:
            with self._use() as ptr:
                rv, rel = _submit(_native.lock_release_async, ptr, self.session.client._message)
        except Exception:  # noqa: BLE001 - closed: the session's end releases it
            return
        if rv == 0:
            self._inflight += 1
            rel.add_done_callback(lambda _f: self._call_ended())

    async def acquire_async(self, timeout=_DEFAULT, mode=None, permits=None):
        """Takes the lock, waiting in the cluster's FIFO queue up to
        `timeout` seconds (None: until granted or the session ends; 0: not
        at all). Returns the fencing token; raises as Lock.acquire. If the
        awaiting task is cancelled, a grant that comes later is released."""
        t = timeout_ms(self._timeout if timeout is _DEFAULT else timeout)
        self._granted = await self._run("acquire", _native.lock_acquire_async,
                                        self._mode if mode is None else mode,
                                        self._permits_arg(permits), t,
                                        acquiring=True)
        return self._granted

    async def release_async(self):
        """Releases one level; returns the levels still held."""
        try:
            left = await self._run("release", _native.lock_release_async)
        except NotHolder:
            if self._granted:
                raise self._revoked() from None
            raise
        except OutcomeUnknown:
            self._release_failed(self.token)
            raise
        return self._released(left)

    def close(self):
        """Frees the handle now, or once its call in flight has ended."""
        if self._inflight > 0:
            self._close_when_idle = True
        else:
            super().close()

    async def __aenter__(self):
        try:
            await self.acquire_async()
        except BaseException:
            self.close()
            raise
        return self

    async def __aexit__(self, exc_type, exc, tb):
        with self._block_end(exc_type):
            if self.held:
                await self.release_async()
