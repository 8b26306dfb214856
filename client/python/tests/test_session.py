"""Sessions on a real 3-node cluster: the lost-session callback, both ways
a session is lost (the client's grace period runs out while the cluster
has no majority; the cluster expires a paused client's session), and what
a lost session's locks are worth afterwards."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import unittest

import raftlock

from cluster import start_for_module

cluster = None


def setUpModule():
    global cluster
    cluster = start_for_module()


class SessionLife(unittest.TestCase):
    def test_close_releases_and_is_idempotent(self):
        with raftlock.Client(cluster.endpoints) as c:
            with c.session(ttl=5) as s:
                lk = s.lock("life/a")
                lk.acquire()
                self.assertTrue(s.valid)
                self.assertGreater(s.valid_until_ms, raftlock.now_ms())
            self.assertTrue(s.lost)
            self.assertFalse(s.valid)
            self.assertEqual(lk.token, 0)
            s.close()
            with self.assertRaises(raftlock.NotFound):
                c.lock_info("life/a")
            with self.assertRaises(raftlock.StateError):
                s.lock("life/b")

    def test_client_lock_reopens_its_session_after_a_loss(self):
        with raftlock.Client(cluster.endpoints) as c:
            with c.lock("life/default") as t1:
                pass
            c._default().close()  # as if lost
            with c.lock("life/default") as t2:
                self.assertGreater(t2, t1)


class CloseWaitsForCallsUnderWay(unittest.TestCase):
    """A close in one thread while another thread is in a call of the same
    object: the close waits, so the call never runs on freed memory. The
    library function is held inside the call by a stand-in that waits."""

    def hold_inside(self, name):
        """Replaces raftlock._native.<name> by one that waits for the
        returned event once it is called; (called, go)."""
        real = getattr(raftlock._native, name)
        called, go = threading.Event(), threading.Event()

        def held(*args):
            called.set()
            go.wait(10)
            return real(*args)

        setattr(raftlock._native, name, held)
        self.addCleanup(setattr, raftlock._native, name, real)
        self.addCleanup(go.set)
        return called, go

    def close_during(self, call, close, name):
        called, go = self.hold_inside(name)
        caller = threading.Thread(target=call)
        caller.start()
        self.assertTrue(called.wait(10))
        closer = threading.Thread(target=close)
        closer.start()
        closer.join(0.3)
        self.assertTrue(closer.is_alive(), f"the close did not wait for {name}")
        go.set()
        caller.join(10)
        closer.join(10)
        self.assertFalse(closer.is_alive())

    def test_session_and_lock_calls(self):
        with raftlock.Client(cluster.endpoints) as c:
            s = c.session(ttl=5)
            self.close_during(lambda: s.valid, s.close, "session_valid")
            s = c.session(ttl=5)
            lk = s.lock("close/held")
            lk.acquire()
            self.close_during(lambda: lk.token, s.close, "lock_token")
            self.assertEqual(lk.token, 0)
            lk = c.session(ttl=5).lock("close/held")
            self.close_during(lambda: lk.token, lk.close, "lock_token")

    def test_a_session_opened_while_the_client_closes_is_closed_with_it(self):
        c = raftlock.Client(cluster.endpoints)
        opened = []
        self.close_during(lambda: opened.append(c.session(ttl=5)), c.close, "session_open")
        self.assertTrue(opened[0].lost)  # closed by the client's close, not left dangling
        self.assertTrue(c.closed)


class LostByGrace(unittest.TestCase):
    """Two of three nodes stopped: no keepalive can be acknowledged, the
    session goes into jeopardy, and the grace period ends it."""

    def test_on_lost_fires_with_a_timeout(self):
        events, lost = [], threading.Event()

        def on_event(session, event, error):
            events.append(event)

        def on_lost(session, error):
            lost.error = error
            lost.thread = threading.current_thread()
            lost.refused = []
            for close in (session.close, session.client.close):  # would wait for itself
                try:
                    close()
                except raftlock.StateError as e:
                    lost.refused.append(e)
            lost.set()

        with raftlock.Client(cluster.endpoints, request_timeout=1) as c:
            s = c.session(ttl=1.0, grace=1.0, on_lost=on_lost, on_event=on_event)
            lk = s.lock("lost/grace")
            token = lk.acquire()
            stopped = [0, 1]
            for i in stopped:
                cluster.signal(i, signal.SIGSTOP)
            try:
                self.assertTrue(lost.wait(15), "on_lost did not fire")
            finally:
                for i in stopped:
                    cluster.signal(i, signal.SIGCONT)
            self.assertIsInstance(lost.error, raftlock.Timeout)
            self.assertEqual(lost.error.code, raftlock.Code.ETIMEDOUT)
            self.assertIsNot(lost.thread, threading.main_thread())
            self.assertEqual(len(lost.refused), 2, "close from a callback was not refused")
            self.assertFalse(c.closed)
            self.assertEqual(events, [raftlock.SessionEvent.JEOPARDY,
                                      raftlock.SessionEvent.LOST])
            self.assertTrue(s.lost)
            self.assertIs(s.lost_error, lost.error)
            self.assertFalse(s.valid)
            self.assertEqual(s.valid_until_ms, 0)
            self.assertEqual(lk.token, 0)  # void: never act on it again
            with self.assertRaises(raftlock.SessionLost):
                s.lock("lost/other").acquire(timeout=0)
            s.close()  # still fine: best effort on the cluster
            cluster.wait_ready()
            self.assertGreater(token, 0)


CHILD = textwrap.dedent("""
    import sys, threading, raftlock
    lost = threading.Event()
    def on_lost(session, error):
        lost.error = error
        lost.set()
    with raftlock.Client(sys.argv[1]) as c:
        # a long grace: only the cluster's answer can end this session
        s = c.session(ttl=1.0, grace=60, on_lost=on_lost)
        try:
            with s.lock("lost/paused") as lk:
                print("token", lk.token, flush=True)
                if not lost.wait(30):
                    print("not lost", flush=True)
                    sys.exit(1)
                print("lost", type(lost.error).__name__, lost.error.name, lk.token, flush=True)
                try:
                    s.lock("lost/again").acquire(timeout=0)
                except raftlock.SessionLost:
                    print("refused", flush=True)
        except raftlock.SessionLost:
            print("the block's end says so", flush=True)
""")


class LostByExpiry(unittest.TestCase):
    """A paused client: the cluster expires its session, another takes the
    lock, and the client learns it when it runs again."""

    def test_paused_client_is_told_its_session_expired(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        child = subprocess.Popen([sys.executable, "-c", CHILD, cluster.endpoints],
                                 stdout=subprocess.PIPE, text=True, env=env)
        self.addCleanup(child.kill)
        line = child.stdout.readline().split()
        self.assertEqual(line[0], "token", line)
        child_token = int(line[1])
        child.send_signal(signal.SIGSTOP)
        try:
            with raftlock.Client(cluster.endpoints) as c, c.session(ttl=5) as s:
                with s.lock("lost/paused", timeout=15) as lk:
                    self.assertGreater(lk.token, child_token)
        finally:
            child.send_signal(signal.SIGCONT)
        out = child.communicate(timeout=30)[0].split("\n")
        self.assertEqual(out[:3], ["lost SessionLost ESESSION 0", "refused",
                                   "the block's end says so"])
        self.assertEqual(child.returncode, 0)


if __name__ == "__main__":
    unittest.main()
