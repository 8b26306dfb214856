"""Blocking locks on a real 3-node cluster: mutual exclusion between two
clients, strictly increasing fencing tokens, timeouts, try-locks, nesting,
read-write locks, semaphores, and errors that carry the library's message."""

import threading
import time
import unittest

import raftlock

from cluster import revoke, start_for_module

cluster = None


def setUpModule():
    global cluster
    cluster = start_for_module()


class Critical:
    """A critical section that notices two holders at once."""

    def __init__(self):
        self.inside = 0
        self.overlaps = 0
        self.tokens = []
        self.mu = threading.Lock()

    def enter(self, token):
        with self.mu:
            self.inside += 1
            self.overlaps += self.inside > 1
            self.tokens.append(token)

    def leave(self):
        with self.mu:
            self.inside -= 1


class ExclusiveLocks(unittest.TestCase):
    def setUp(self):
        self.a = raftlock.Client(cluster.endpoints)
        self.b = raftlock.Client(cluster.endpoints)
        self.addCleanup(self.a.close)
        self.addCleanup(self.b.close)

    def test_two_clients_exclude_each_other_and_tokens_increase(self):
        crit = Critical()

        def worker(client):
            for _ in range(15):
                with client.lock("mx/counter", timeout=20) as token:
                    crit.enter(token)
                    time.sleep(0.005)
                    crit.leave()

        threads = [threading.Thread(target=worker, args=(c,)) for c in (self.a, self.b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(len(crit.tokens), 30)
        self.assertEqual(crit.overlaps, 0)
        self.assertTrue(all(x < y for x, y in zip(crit.tokens, crit.tokens[1:])),
                        "tokens not strictly increasing in grant order")

    def test_the_token_is_the_holders(self):
        with self.a.lock("mx/token") as token:
            self.assertGreater(token, 0)
            self.assertTrue(self.b.check_token("mx/token", token))
            info = self.b.lock_info("mx/token")
            self.assertEqual([h.token for h in info.holders], [token])
            self.assertEqual(info.kind, "mutex")
        self.assertFalse(self.b.check_token("mx/token", token))
        with self.assertRaises(raftlock.NotFound):
            self.b.lock_info("mx/token")

    def test_timeout_and_try_lock_raise_when_held(self):
        with self.a.session(ttl=5) as sa, self.b.session(ttl=5) as sb:
            with sa.lock("mx/held"):
                start = time.monotonic()
                with self.assertRaises(raftlock.LockTimeout) as cm:
                    with sb.lock("mx/held", timeout=0.4):
                        self.fail("the block ran without the lock")
                waited = time.monotonic() - start
                # the cluster's wait deadline counts whole milliseconds of its own clock
                self.assertGreaterEqual(waited, 0.4 - 0.02)
                self.assertLess(waited, 0.4 + 2.0)  # the library's bound: + min(rto, 1 s)
                self.assertIsInstance(cm.exception, raftlock.Timeout)
                self.assertIn("acquire 'mx/held'", str(cm.exception))
                with self.assertRaises(raftlock.LockBusy) as cm:
                    with sb.try_lock("mx/held"):
                        self.fail("the block ran without the lock")
                self.assertEqual(cm.exception.code, raftlock.Code.EBUSY)
                self.assertIn("held by another owner", str(cm.exception))
                self.assertIsNone(sb.lock("mx/held").try_acquire())
            # released on exit: the other session gets it now
            with sb.try_lock("mx/held") as lk:
                self.assertGreater(lk.token, 0)

    def test_numbers_that_would_wrap_are_refused(self):
        with self.a.session(ttl=5) as s:
            # 4294967.3 s wrapped to 4 ms in a C unsigned; -1 reached the library
            for delay in (-1, 4294967.3, 600.001, float("nan")):
                with self.subTest(delay):
                    with self.assertRaises(raftlock.InvalidArgument) as cm:
                        s.lock("mx/delay", lock_delay=delay)
                    self.assertIn("lock_delay must be 0 to 600 s", str(cm.exception))
            with self.assertRaises(raftlock.InvalidArgument):
                s.semaphore("sem/wrap", 2**32 + 1)  # was a semaphore of 1
            with self.assertRaises(raftlock.InvalidArgument):
                s.semaphore("sem/wrap", 2, permits=2**32 + 1)
            with self.assertRaises(raftlock.InvalidArgument):
                s.lock("mx/delay").acquire(permits=-1)
            with s.lock("mx/delay", lock_delay=0.0004) as lk:  # 1 ms, not "none"
                self.assertEqual(self.b.lock_info("mx/delay").lock_delay_ms, 1)
                self.assertTrue(lk.held)
        for ttl in (0.0004, 0, 600.5, -1):  # 0.0004 s was 0 ms: the 10 s default
            with self.subTest(ttl):
                with self.assertRaises(raftlock.InvalidArgument) as cm:
                    self.a.session(ttl=ttl)
                self.assertIn("ttl must be 1 to 600 s", str(cm.exception))
        with self.assertRaises(raftlock.InvalidArgument):
            self.a.session(ttl=5, grace=2**32 / 1000)

    def test_a_handle_nests_and_another_handle_is_another_owner(self):
        with self.a.session(ttl=5) as s:
            lk = s.lock("mx/nest")
            t1 = lk.acquire(timeout=0)
            t2 = lk.acquire(timeout=0)
            self.assertEqual(t1, t2)
            with self.assertRaises(raftlock.LockBusy):
                s.lock("mx/nest").acquire(timeout=0)
            self.assertEqual(lk.release(), 1)
            self.assertEqual(lk.token, t1)
            self.assertEqual(lk.release(), 0)
            self.assertEqual(lk.token, 0)
            with self.assertRaises(raftlock.NotHolder):
                lk.release()
            lk.close()
            with self.assertRaises(raftlock.Canceled):
                lk.acquire()

    def test_waiter_gets_the_lock_when_released(self):
        with self.a.session(ttl=5) as sa, self.b.session(ttl=5) as sb:
            holder = sa.lock("mx/handover")
            first = holder.acquire()
            got = []
            t = threading.Thread(target=lambda: got.append(sb.lock("mx/handover").acquire(10)))
            t.start()
            time.sleep(0.3)
            self.assertEqual(got, [])
            holder.release()
            t.join(10)
            self.assertEqual(len(got), 1)
            self.assertGreater(got[0], first)

    def wait_revoked(self, lk):
        deadline = time.monotonic() + 10
        while lk.held and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertFalse(lk.held, "the revoke never reached the holder")

    def test_a_block_whose_grant_is_revoked_raises_at_its_end(self):
        with self.a.session(ttl=5) as s:
            with self.assertRaises(raftlock.LockRevoked) as cm:
                with s.lock("mx/revoked") as lk:
                    token = lk.token
                    revoke(self.b, "mx/revoked")
                    self.wait_revoked(lk)
            self.assertIsInstance(cm.exception, raftlock.NotHolder)
            self.assertIn(str(token), str(cm.exception))
            self.assertFalse(s.lost)
            # a release of a revoked grant says so too
            lk = s.lock("mx/revoked")
            lk.acquire()
            revoke(self.b, "mx/revoked")
            self.wait_revoked(lk)
            with self.assertRaises(raftlock.LockRevoked):
                lk.release()
            with self.assertRaises(raftlock.NotHolder) as cm:
                lk.release()  # and then it is a plain release of nothing
            self.assertNotIsInstance(cm.exception, raftlock.LockRevoked)
            lk.close()
            # released by the block itself: no error
            with s.lock("mx/revoked") as lk:
                lk.release()
            # the block's own exception is not replaced
            with self.assertRaises(KeyError):
                with s.lock("mx/revoked") as lk:
                    revoke(self.b, "mx/revoked")
                    self.wait_revoked(lk)
                    raise KeyError("the block's")

    def test_bad_names(self):
        with self.a.session(ttl=5) as s:
            with self.assertRaises(raftlock.InvalidArgument) as cm:
                s.lock("")
            self.assertIn("name must be", str(cm.exception))
            with self.assertRaises(raftlock.InvalidArgument) as cm:
                s.lock("x" * 300)
            self.assertEqual(cm.exception.code, raftlock.Code.ETOOBIG)
            with self.assertRaises(raftlock.InvalidArgument):
                s.semaphore("sem/none", 0)
            # not cut at the NUL into "job", another lock than the caller's
            for make in (s.lock, s.read_lock, s.write_lock, s.lock_async):
                with self.assertRaises(raftlock.InvalidArgument) as cm:
                    make("job\0A")
                self.assertIn("NUL", str(cm.exception))
        with self.assertRaises(raftlock.InvalidArgument) as cm:
            self.a.session(ttl=0.1)  # below the TTL minimum
        self.assertEqual(cm.exception.code, raftlock.Code.EINVAL)


class ReadWriteLocks(unittest.TestCase):
    def setUp(self):
        self.c = raftlock.Client(cluster.endpoints)
        self.addCleanup(self.c.close)
        self.s = [self.c.session(ttl=5) for _ in range(3)]

    def test_readers_share_and_a_writer_excludes(self):
        r1, r2, w = self.s
        with r1.read_lock("rw/doc", timeout=5) as a, r2.read_lock("rw/doc", timeout=5) as b:
            self.assertNotEqual(a.token, b.token)
            info = self.c.lock_info("rw/doc")
            self.assertEqual(len(info.holders), 2)
            self.assertEqual((info.holders_total, info.waiters_total), (2, 0))
            self.assertFalse(info.holders_more)
            self.assertEqual(info.kind, "rwlock")
            # paged: after the first grant's token, the second only
            first = min(a.token, b.token)
            page = self.c.lock_info("rw/doc", holders_after=first)
            self.assertEqual([h.token for h in page.holders], [max(a.token, b.token)])
            self.assertEqual(page.holders_total, 2)
            with self.assertRaises(raftlock.LockTimeout):
                with w.write_lock("rw/doc", timeout=0.3):
                    pass
        with w.write_lock("rw/doc", timeout=5) as wl:
            self.assertGreater(wl.token, max(a.token, b.token))
            with self.assertRaises(raftlock.LockBusy):
                with r1.read_lock("rw/doc", timeout=0):
                    pass

    def test_a_waiting_writer_blocks_later_readers(self):
        r1, r2, w = self.s
        reader = r1.read_lock("rw/fair", timeout=5)
        reader.__enter__()
        writer_done = threading.Event()

        def write():
            with w.write_lock("rw/fair", timeout=10):
                writer_done.set()

        t = threading.Thread(target=write)
        t.start()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not self.c.lock_info("rw/fair").waiters:
            time.sleep(0.02)
        self.assertEqual(len(self.c.lock_info("rw/fair").waiters), 1)
        with self.assertRaises(raftlock.LockBusy):  # a reader may not pass the writer
            with r2.read_lock("rw/fair", timeout=0):
                pass
        reader.__exit__(None, None, None)
        t.join(10)
        self.assertTrue(writer_done.is_set())


class Semaphores(unittest.TestCase):
    def test_permits_are_counted(self):
        with raftlock.Client(cluster.endpoints) as c:
            s = [c.session(ttl=5) for _ in range(3)]
            with s[0].semaphore("sem/pool", 2) as a, s[1].semaphore("sem/pool", 2) as b:
                self.assertNotEqual(a.token, b.token)
                info = c.lock_info("sem/pool")
                self.assertEqual((info.kind, info.limit, len(info.holders)), ("semaphore", 2, 2))
                with self.assertRaises(raftlock.LockBusy):
                    with s[2].semaphore("sem/pool", 2, timeout=0):
                        pass
                with self.assertRaises(raftlock.KindMismatch) as cm:
                    with s[2].semaphore("sem/pool", 3, timeout=0):
                        pass
                self.assertEqual(cm.exception.code, raftlock.Code.EKIND)
                with self.assertRaises(raftlock.KindMismatch):
                    with s[2].lock("sem/pool", timeout=0):
                        pass
            with s[2].semaphore("sem/pool", 2, permits=2, timeout=5) as both:
                self.assertEqual(c.lock_info("sem/pool").holders[0].permits, 2)
                self.assertGreater(both.token, 0)


class Introspection(unittest.TestCase):
    def test_status_sessions_and_locks(self):
        with raftlock.Client(cluster.endpoints, client_name="py-introspect") as c:
            st = c.status()
            self.assertIn(st.role, ("leader", "follower"))
            self.assertEqual(len(st.members), 3)
            self.assertEqual({m.client_address for m in st.members}, set(cluster.addresses))
            with c.session(ttl=5) as s, s.lock("intro/a"), s.lock("intro/b"):
                mine = [x for x in c.sessions() if x.id == s.id]
                self.assertEqual(len(mine), 1)
                self.assertEqual(mine[0].who.client_name, "py-introspect")
                self.assertEqual(sorted(mine[0].locks), ["intro/a", "intro/b"])
                self.assertEqual([li.name for li in c.locks("intro/")], ["intro/a", "intro/b"])


    def test_pages_go_on_after_a_name_that_is_not_utf8(self):
        # 100 is the server's page: the first page ends at b"pg/\xfe", whose
        # text ("pg/\ufffd", UTF-8 b"pg/\xef\xbf\xbd") sorts before it and
        # made the second page repeat it.
        names = [f"pg/{i:03d}".encode() for i in range(99)] + [b"pg/\xfe", b"pg/\xff"]
        with raftlock.Client(cluster.endpoints) as c, c.session(ttl=10) as s:
            for name in names:
                s.lock(name).acquire(timeout=0)
            listed = [li.name for li in c.locks("pg/")]
        self.assertEqual(len(listed), len(names))
        self.assertEqual(listed[-2:], ["pg/\ufffd", "pg/\ufffd"])

if __name__ == "__main__":
    unittest.main()
