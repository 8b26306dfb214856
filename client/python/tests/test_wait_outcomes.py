"""How a waiting acquire ends when the cluster refuses it or goes silent,
on a real 3-node cluster that queues at most two waiters on a lock: a
refusal by a limit names the limit, through asyncio and through a
waiting Lock.acquire() alike; an acquire whose cluster stops answering
gives up as soon as the library's blocking call does, not a whole
request timeout later, and a grant that comes after is not held."""

import asyncio
import ctypes
import signal
import threading
import time
import unittest

import raftlock
from raftlock import _native

from cluster import start_for_module

MAX_WAITERS = 2
cluster = None


def setUpModule():
    global cluster
    cluster = start_for_module(extra_args=["--max-waiters-per-lock", str(MAX_WAITERS)])


def wait_waiters(client, name, n):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if len(client.lock_info(name).waiters) == n:
                return
        except raftlock.NotFound:
            pass
        time.sleep(0.02)
    raise AssertionError(f"{name} never had {n} waiters")


class RefusedByALimit(unittest.TestCase):
    def test_the_error_names_the_limit_for_waits_and_asyncio(self):
        name = "outcome/full"
        with raftlock.Client(cluster.endpoints) as c, c.session(ttl=10) as s:
            s.lock(name).acquire()
            queued = [s.lock(name) for _ in range(MAX_WAITERS)]
            threads = []
            for lk in queued:
                t = threading.Thread(target=lambda lk=lk: self.ends_canceled(lk))
                t.start()
                threads.append(t)
            wait_waiters(c, name, MAX_WAITERS)

            with self.assertRaises(raftlock.LimitReached) as waited:
                s.lock(name).acquire(timeout=5)

            async def acquire_async():
                async with s.lock_async(name, timeout=5):
                    self.fail("the queue is full")

            with self.assertRaises(raftlock.LimitReached) as awaited:
                asyncio.run(acquire_async())
            s.close()  # ends the queued waits
            for t in threads:
                t.join()
        for e in (waited.exception, awaited.exception):
            self.assertIn(f"acquire '{name}'", str(e))
            self.assertIn("max-waiters-per-lock", str(e))

    def ends_canceled(self, lk):
        try:
            lk.acquire(timeout=30)
        except (raftlock.Canceled, raftlock.SessionLost):
            pass


class UnansweredWait(unittest.TestCase):
    """Every node stopped while two acquires wait on a held lock: one a
    waiting Lock.acquire(), the other the library's blocking call."""

    TIMEOUT = 1.5
    REQUEST_TIMEOUT = 2.0

    def test_unanswered_wait_ends_within_its_bound(self):
        name = "outcome/silent"
        holder_client = raftlock.Client(cluster.endpoints)
        self.addCleanup(holder_client.close)
        holder = holder_client.session(ttl=60)
        holder.lock(name).acquire()
        c = raftlock.Client(cluster.endpoints, request_timeout=self.REQUEST_TIMEOUT)
        self.addCleanup(c.close)
        waiting = c.session(ttl=60)
        blocking = c.session(ttl=60).lock(name)
        ended = {}

        def wait_in_python():
            start = time.monotonic()
            try:
                with waiting.lock(name, timeout=self.TIMEOUT):  # freed on failure
                    ended["python"] = ("held", 0)
                    return
            except raftlock.RaftlockError as e:
                ended["python"] = (e, time.monotonic() - start)

        def wait_in_c():
            token = ctypes.c_uint64()
            start = time.monotonic()
            with blocking._use() as ptr:
                rv = _native.lock_acquire(ptr, _native.EXCLUSIVE, 1, int(self.TIMEOUT * 1000),
                                          ctypes.byref(token))
            ended["c"] = (rv, time.monotonic() - start)

        threads = [threading.Thread(target=f) for f in (wait_in_python, wait_in_c)]
        for t in threads:
            t.start()
        wait_waiters(holder_client, name, 2)
        for i in range(cluster.n):
            cluster.signal(i, signal.SIGSTOP)
        try:
            for t in threads:
                t.join(self.TIMEOUT + self.REQUEST_TIMEOUT + 5)
        finally:
            for i in range(cluster.n):
                cluster.signal(i, signal.SIGCONT)
        error, python_took = ended["python"]
        c_status, c_took = ended["c"]
        self.assertEqual(c_status, raftlock.Code.EUNKNOWN)
        self.assertIsInstance(error, raftlock.AcquireOutcomeUnknown)
        self.assertIn(f"acquire '{name}'", str(error))
        # the blocking call cancels at its timeout and gives up
        # min(request timeout, 1 s) later; the Python wait cannot cancel:
        # the asynchronous call's own limit ends it
        self.assertLess(c_took, self.TIMEOUT + min(self.REQUEST_TIMEOUT, 1.0) + 0.5)
        self.assertGreaterEqual(python_took, self.TIMEOUT + self.REQUEST_TIMEOUT - 0.1)
        self.assertLess(python_took, self.TIMEOUT + self.REQUEST_TIMEOUT + 1.0)

        # Running again, the cluster ends both waits; the lock handed on
        # by the holder goes to nobody of this client.
        cluster.wait_ready()
        holder.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                holder_client.lock_info(name)
            except raftlock.NotFound:
                break
            time.sleep(0.05)
        else:
            self.fail(f"{name} still held or awaited: {holder_client.lock_info(name)}")
        c.close()


class ReleaseOutcomeUnknown(unittest.TestCase):
    def test_the_block_end_does_not_call_it_revoked(self):
        """A release not answered in time (the cluster stopped) leaves the
        handle holding nothing: the end of its `with` block, the caller
        having caught the error, raises no LockRevoked (no revoke ran)."""
        name = "outcome/release"
        c = raftlock.Client(cluster.endpoints, request_timeout=1.0)
        self.addCleanup(c.close)
        s = c.session(ttl=60)
        with s.lock(name, timeout=5) as lk:
            for i in range(cluster.n):
                cluster.signal(i, signal.SIGSTOP)
            try:
                with self.assertRaises(raftlock.OutcomeUnknown):
                    lk.release()
            finally:
                for i in range(cluster.n):
                    cluster.signal(i, signal.SIGCONT)
            self.assertEqual(lk.token, 0)
        cluster.wait_ready()


if __name__ == "__main__":
    unittest.main()
