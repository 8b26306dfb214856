"""Closing a session, a client or a handle while another thread's acquire
waits: the close neither frees the handle under a call about to enter the
library nor blocks for the length of the wait, and the acquire ends with
Canceled."""

import threading
import time
import unittest

import raftlock
from raftlock import _native, _waits
from raftlock.errors import Code

from cluster import start_for_module

cluster = None


def setUpModule():
    global cluster
    cluster = start_for_module()


class PausedBeforeTheLibrary:
    """Holds an acquire's thread between the guard's use and the library's
    call (where Python may switch threads), until let go; a call let go
    after its session's close returned is not made (the handle is freed:
    that is the failure), it gets ECANCELED."""

    NAMES = ("lock_acquire", "lock_acquire_async")

    def __init__(self, test):
        self.entered = threading.Event()
        self.let_go = threading.Event()
        self.freed = threading.Event()  # set by the test once close returned
        self.calls_after_free = 0
        for name in self.NAMES:
            real = getattr(_native, name)
            setattr(_native, name, self._paused(real))
            test.addCleanup(setattr, _native, name, real)

    def _paused(self, real):
        def call(*args):
            self.entered.set()
            self.let_go.wait(10)
            if self.freed.is_set():
                self.calls_after_free += 1
                return Code.ECANCELED
            return real(*args)
        return call


class CloseDuringWait(unittest.TestCase):
    def setUp(self):
        self.client = raftlock.Client(cluster.endpoints)
        self.addCleanup(self.client.close)
        self.holder = self.client.session(ttl=5)
        self.addCleanup(self.holder.close)

    def held(self, name):
        self.holder.lock(name).acquire(timeout=0)

    def wait_queued(self, name):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if len(self.client.lock_info(name).waiters) == 1:
                return
            time.sleep(0.02)
        self.fail(f"the acquire of {name} never queued")

    def acquire_in_thread(self, lock, timeout):
        out = []

        def run():
            try:
                out.append(lock.acquire(timeout=timeout))
            except raftlock.RaftlockError as e:
                out.append(e)
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, out

    def test_session_close_waits_for_an_acquire_about_to_enter_the_library(self):
        self.held("cw/race")
        s = self.client.session(ttl=5)
        lk = s.lock("cw/race")
        paused = PausedBeforeTheLibrary(self)
        acquirer, out = self.acquire_in_thread(lk, 30)
        self.assertTrue(paused.entered.wait(10))
        closer = threading.Thread(target=s.close, daemon=True)
        closer.start()
        closer.join(0.5)
        closed_under_the_call = not closer.is_alive()
        if closed_under_the_call:
            paused.freed.set()
        paused.let_go.set()
        closer.join(10)
        acquirer.join(10)
        self.assertFalse(closed_under_the_call,
                         "the session's close freed the handle under an acquire")
        self.assertEqual(paused.calls_after_free, 0)
        self.assertFalse(closer.is_alive(), "the session's close blocked")
        self.assertFalse(acquirer.is_alive())
        self.assertEqual(len(out), 1)
        self.assertIsInstance(out[0], raftlock.Canceled)

    def test_session_close_ends_a_wait_without_end(self):
        self.held("cw/session")
        s = self.client.session(ttl=5)
        acquirer, out = self.acquire_in_thread(s.lock("cw/session"), None)
        self.wait_queued("cw/session")
        t0 = time.monotonic()
        s.close()
        acquirer.join(5)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertFalse(acquirer.is_alive())
        self.assertIsInstance(out[0], raftlock.Canceled)

    def test_handle_close_ends_the_wait_and_releases_a_late_grant(self):
        self.held("cw/handle")
        s = self.client.session(ttl=5)
        self.addCleanup(s.close)
        lk = s.lock("cw/handle")
        acquirer, out = self.acquire_in_thread(lk, None)
        self.wait_queued("cw/handle")
        closer = threading.Thread(target=lk.close, daemon=True)
        closer.start()
        closer.join(3)
        self.assertFalse(closer.is_alive(), "Lock.close() blocked behind the acquire")
        acquirer.join(3)
        self.assertFalse(acquirer.is_alive())
        self.assertIsInstance(out[0], raftlock.Canceled)
        self.assertEqual(lk.token, 0)
        # The wait is still queued: the holder's release grants it to the
        # closed handle, whose grant is released at once.
        self.holder.close()
        other = self.client.session(ttl=5)
        self.addCleanup(other.close)
        self.assertGreater(other.lock("cw/handle").acquire(timeout=10), 0)
        deadline = time.monotonic() + 5  # and the handle was freed after
        while lk in s._locks and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertNotIn(lk, s._locks)

    def test_handle_freed_after_the_last_unsettled_wait(self):
        """Two waits the library still owes an answer (an abandoned wait's
        late grant being released, and an acquire sent meanwhile): a close
        frees the handle when both have settled, not at the first."""
        s = self.client.session(ttl=5)
        self.addCleanup(s.close)
        lk = s.lock("cw/two")
        ptr = lk._guard.ptr
        waits = [_waits.Wait(lambda: None, None, lk._wait_settled) for _ in range(2)]
        with lk._waits_mu:
            lk._waits.update(waits)
        lk.close()
        self.assertIn(lk, s._locks)  # both owed: not freed
        lk._wait_settled(waits[0], ptr)
        self.assertIn(lk, s._locks)
        lk._wait_settled(waits[1], ptr)
        self.assertNotIn(lk, s._locks)

    def test_client_close_ends_a_wait(self):
        self.held("cw/client")
        c = raftlock.Client(cluster.endpoints)
        acquirer, out = self.acquire_in_thread(c.session(ttl=5).lock("cw/client"), None)
        self.wait_queued("cw/client")
        c.close()
        acquirer.join(5)
        self.assertFalse(acquirer.is_alive())
        self.assertIsInstance(out[0], raftlock.Canceled)


if __name__ == "__main__":
    unittest.main()
