"""Keeps a library object alive while calls of other threads use it.

A method reads the object's pointer and calls into the library; close()
in another thread frees the object. Without a guard the call may start on
freed memory. With one, every call runs inside use(): close() makes new
uses fail, waits for those under way, and only then frees.

Every use is short, so close() never waits long: an acquire that waits
does so outside the library and outside its use (_waits.py).
"""

import contextlib
import threading


class Guard:
    def __init__(self, ptr, closed_error):
        self._cv = threading.Condition()
        self._ptr = ptr
        self._closed_error = closed_error  # () -> the exception of a use after close
        self._users = 0

    @property
    def ptr(self):
        """The pointer, None once closed: for a look that calls nothing."""
        return self._ptr

    @contextlib.contextmanager
    def use(self):
        """The pointer, alive until the block ends (see the module's text)."""
        with self._cv:
            ptr = self._ptr
            if ptr is None:
                raise self._closed_error()
            self._users += 1
        try:
            yield ptr
        finally:
            with self._cv:
                self._users -= 1
                if self._users == 0:
                    self._cv.notify_all()

    def close(self):
        """Fails new uses, waits for those under way, and returns the
        pointer to free (None: closed already)."""
        with self._cv:
            ptr, self._ptr = self._ptr, None
            while self._users:
                self._cv.wait()
        return ptr

    def abandon(self):
        """Fails new uses without waiting: for an object that another's
        close frees (a lock handle, freed with its session, whose close
        waited for the uses of its handles)."""
        with self._cv:
            self._ptr = None
