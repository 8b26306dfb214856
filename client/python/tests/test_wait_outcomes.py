"""How a waiting acquire ends when the cluster refuses it, on a real
3-node cluster that queues at most two waiters on a lock: a refusal by
a limit names the limit, through asyncio and through a waiting
Lock.acquire() alike."""

import asyncio
import threading
import time
import unittest

import raftlock

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


if __name__ == "__main__":
    unittest.main()
