"""asyncio on a real 3-node cluster: many coroutines queued on one lock,
granted one at a time with increasing tokens and without a thread each;
timeouts, cancellation, shared waiters, and a session close that ends the
waits."""

import asyncio
import os
import time
import unittest

import raftlock

from cluster import revoke, start_for_module

cluster = None


def setUpModule():
    global cluster
    cluster = start_for_module()


def os_threads():
    return len(os.listdir("/proc/self/task"))


class AsyncLocks(unittest.IsolatedAsyncioTestCase):
    def setUp(self):
        self.c = raftlock.Client(cluster.endpoints)
        self.addCleanup(self.c.close)

    async def wait_waiters(self, name, n):
        # A blocking read in the loop is short, and no executor thread
        # comes into the thread count.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if len(self.c.lock_info(name).waiters) == n:
                    return
            except raftlock.NotFound:
                pass
            await asyncio.sleep(0.02)
        self.fail(f"{name} never had {n} waiters")

    async def wait_free(self, name, why):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                self.c.lock_info(name)
            except raftlock.NotFound:
                return
            await asyncio.sleep(0.02)
        self.fail(why)

    async def test_many_waiters_one_at_a_time_without_a_thread_each(self):
        n = 40
        s = self.c.session(ttl=5)
        holder = self.c.session(ttl=5).lock("aio/many")
        holder.acquire()
        threads_before = os_threads()
        inside, overlaps, tokens = 0, 0, []

        async def worker():
            nonlocal inside, overlaps
            async with s.lock_async("aio/many", timeout=30) as lk:
                inside += 1
                overlaps += inside > 1
                tokens.append(lk.token)
                await asyncio.sleep(0.002)
                inside -= 1

        tasks = [asyncio.create_task(worker()) for _ in range(n)]
        await self.wait_waiters("aio/many", n)
        self.assertEqual(os_threads(), threads_before)  # queued: no thread per waiter
        holder.release()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        self.assertEqual(len(tokens), n)
        self.assertEqual(overlaps, 0)
        self.assertTrue(all(x < y for x, y in zip(tokens, tokens[1:])))
        self.assertEqual(os_threads(), threads_before)

    async def test_timeout_raises_lock_timeout(self):
        holder = self.c.session(ttl=5).lock("aio/timeout")
        holder.acquire()
        s = self.c.session(ttl=5)
        start = time.monotonic()
        with self.assertRaises(raftlock.LockTimeout) as cm:
            async with s.lock_async("aio/timeout", timeout=0.3):
                self.fail("the block ran without the lock")
        # the cluster's wait deadline counts whole milliseconds of its own clock
        self.assertGreaterEqual(time.monotonic() - start, 0.3 - 0.02)
        self.assertIn("aio/timeout", str(cm.exception))
        with self.assertRaises(raftlock.LockBusy):
            async with s.lock_async("aio/timeout", timeout=0):
                pass

    async def test_a_cancelled_waiter_releases_a_late_grant(self):
        holder = self.c.session(ttl=5).lock("aio/cancel")
        holder.acquire()
        s = self.c.session(ttl=5)
        lk = s.lock_async("aio/cancel")
        task = asyncio.create_task(lk.acquire_async())
        await self.wait_waiters("aio/cancel", 1)
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        holder.release()  # the queued acquire is granted now, then released
        await self.wait_free("aio/cancel", "the late grant was not released")
        self.assertEqual(lk.token, 0)

    async def test_a_cancelled_async_with_releases_a_late_grant(self):
        # The block's entry frees the handle when cancelled: the grant that
        # comes later must still be released, not kept until the session ends.
        holder = self.c.session(ttl=5).lock("aio/cancel-with")
        holder.acquire()
        s = self.c.session(ttl=5)

        async def waiter():
            async with s.lock_async("aio/cancel-with"):
                self.fail("the block ran after its task was cancelled")

        task = asyncio.create_task(waiter())
        await self.wait_waiters("aio/cancel-with", 1)
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        holder.release()
        await self.wait_free("aio/cancel-with", "the late grant is still held by the session")
        self.assertFalse(s.lost)

    async def test_a_block_whose_grant_is_revoked_raises_at_its_end(self):
        s = self.c.session(ttl=5)
        with self.assertRaises(raftlock.LockRevoked):
            async with s.lock_async("aio/revoked") as lk:
                revoke(self.c, "aio/revoked")
                deadline = time.monotonic() + 10
                while lk.held and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
        self.assertFalse(s.lost)

    async def test_readers_together_and_semaphores(self):
        s = self.c.session(ttl=5)
        both_in = asyncio.Barrier(2)

        async def reader():
            async with s.read_lock_async("aio/rw", timeout=5) as lk:
                await asyncio.wait_for(both_in.wait(), 5)  # both hold at once
                return lk.token

        a, b = await asyncio.gather(reader(), reader())
        self.assertNotEqual(a, b)
        async with s.semaphore_async("aio/sem", 2) as p1, s.semaphore_async("aio/sem", 2) as p2:
            self.assertTrue(p1.held and p2.held)
            with self.assertRaises(raftlock.LockBusy):
                async with s.semaphore_async("aio/sem", 2, timeout=0):
                    pass
        async with s.write_lock_async("aio/rw", timeout=5) as w:
            self.assertGreater(w.token, max(a, b))

    async def test_session_close_ends_the_waits(self):
        holder = self.c.session(ttl=5).lock("aio/close")
        holder.acquire()
        s = self.c.session(ttl=5)
        tasks = [asyncio.create_task(s.lock_async("aio/close").acquire_async())
                 for _ in range(3)]
        await self.wait_waiters("aio/close", 3)
        s.close()
        for t in tasks:
            with self.assertRaises(raftlock.Canceled):
                await asyncio.wait_for(t, 5)
        await self.wait_waiters("aio/close", 0)


if __name__ == "__main__":
    unittest.main()
