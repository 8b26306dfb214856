"""Tests of the harness parts that need no root and no cluster: the fenced
register, the STATUS decoder (in plain and over mutual TLS), the shapes of
the partitions, the security options and the authentication checks."""

import io
import itertools
import json
import os
import random
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import unittest

import register
from checkers import majority
from harness import cluster as C
from harness import floors
from harness import membership as M
from harness import nemesis as N
from harness import runner
from harness import status


class Register(unittest.TestCase):
    def setUp(self):
        self.log = io.StringIO()
        self.reg = register.Register(self.log)

    def call(self, **req):
        return self.reg.handle(req)

    def test_refuses_lower_tokens_reads_included(self):
        self.assertEqual(self.call(op="read", lock="a", token=5),
                         {"ok": True, "value": 0})
        self.assertTrue(self.call(op="write", lock="a", token=5,
                                  value=1)["ok"])
        self.assertTrue(self.call(op="read", lock="a", token=7)["ok"])
        # A read with 7 raised the bar: the holder of 5 can no longer write.
        r = self.call(op="write", lock="a", token=5, value=2)
        self.assertEqual(r, {"ok": False, "error": "refused", "highest": 7})
        self.assertTrue(self.call(op="read", lock="b", token=1)["ok"])
        events = [json.loads(l) for l in self.log.getvalue().splitlines()]
        self.assertEqual([e["type"] for e in events],
                         ["accept", "accept", "accept", "refuse", "accept"])
        self.assertEqual(events[1]["prev"], 0)
        self.assertEqual(events[3]["highest"], 7)

    def test_shared_reads_do_not_raise_the_bar(self):
        self.assertTrue(self.call(op="read", lock="r", token=9,
                                  shared=True)["ok"])
        self.assertTrue(self.call(op="read", lock="r", token=4,
                                  shared=True)["ok"])
        self.assertTrue(self.call(op="write", lock="r", token=5,
                                  value=1)["ok"])
        self.assertFalse(self.call(op="read", lock="r", token=4,
                                   shared=True)["ok"])

    def test_bad_requests(self):
        self.assertFalse(self.call(op="write", lock="a", token=1)["ok"])
        self.assertFalse(self.call(op="read", lock=3, token=1)["ok"])
        self.assertEqual(self.log.getvalue(), "")


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, wt, payload):
    key = varint(num << 3 | wt)
    if wt == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


class Status(unittest.TestCase):
    def test_decodes_a_status_response(self):
        info = (field(1, 0, 2) + field(2, 2, b"leader") + field(3, 0, 7) +
                field(7, 0, 2) + field(11, 0, 1 << 60) + field(14, 0, 1) +
                field(9, 2, field(1, 0, 1)))  # a member: skipped
        env = field(1, 0, 1) + field(40, 2, field(11, 2, info))
        st = status.decode_status(env)
        self.assertEqual(st["node_id"], 2)
        self.assertEqual(st["role"], "leader")
        self.assertEqual(st["term"], 7)
        self.assertEqual(st["next_token"], 1 << 60)
        self.assertTrue(st["ready"])

    def test_error_status_and_garbage(self):
        env = field(40, 2, field(1, 0, (1 << 64) - 6))
        self.assertEqual(status.decode_status(env)["status"], -6)
        with self.assertRaises(ValueError):
            status.decode_status(b"\x52\x05ab")


class FakeNode:
    def __init__(self, i):
        self.i = i   # slot (namespace)
        self.id = i  # member id


class FakeCluster:
    def __init__(self, n, leader):
        self.nodes = [FakeNode(i) for i in range(1, n + 1)]
        self.spares = []
        self._leader = leader

    def leader(self):
        return self._leader

    def node_by_id(self, member_id):
        return next(n for n in self.nodes if n.id == member_id)


class FakeNet:
    def __init__(self):
        self.cut = None
        self.partitioned = False

    def partition(self, cut):
        self.cut = cut

    def heal(self):
        self.cut = None


class Partitions(unittest.TestCase):
    def shapes(self, n):
        seen = {}
        with tempfile.TemporaryDirectory() as d:
            log = N.Log(d)
            for seed in range(60):
                net = FakeNet()
                nem = N.Nemesis(FakeCluster(n, 2), net, random.Random(seed),
                                log, 3000)
                undo, fields = nem._partition()
                seen[fields["mode"]] = (net.cut, fields)
            log.close()
        return seen

    def reach(self, n, cut, i):
        return {j for j in range(1, n + 1) if j not in cut.get(i, set())}

    def test_shapes_on_five_nodes(self):
        seen = self.shapes(5)
        self.assertEqual(set(seen), {"isolate-leader", "halves", "bridge",
                                     "ring"})
        cut, _ = seen["isolate-leader"]
        self.assertEqual(cut[2], {1, 3, 4, 5})
        for i in (1, 3, 4, 5):
            self.assertEqual(cut[i], {2})
        cut, _ = seen["halves"]
        sides = sorted(len(self.reach(5, cut, i)) for i in range(1, 6))
        self.assertEqual(sides, [2, 2, 3, 3, 3])
        cut, fields = seen["bridge"]
        bridge = [i for i in range(1, 6) if i not in cut]
        self.assertEqual(len(bridge), 1)
        cut, _ = seen["ring"]
        views = [frozenset(self.reach(5, cut, i)) for i in range(1, 6)]
        self.assertTrue(all(len(v) == 3 for v in views))  # a majority each
        self.assertEqual(len(set(views)), 5)  # no two the same
        for i in range(1, 6):  # symmetric
            for j in cut[i]:
                self.assertIn(i, cut[j])

    def test_liveness_reads_the_sides_as_the_cut_makes_them(self):
        """The liveness checker judges progress during a partition whose
        largest group is a majority: each group must be nodes that all
        reach each other, and a ring must have no such majority."""
        for n in (3, 5):
            for mode, (cut, fields) in self.shapes(n).items():
                def clique(ids):
                    return all(b not in cut.get(a, set())
                               for a, b in itertools.combinations(ids, 2))
                widest = max(k for k in range(1, n + 1) for ids in
                             itertools.combinations(range(1, n + 1), k)
                             if clique(ids))
                ev = dict(fields, f="partition")
                self.assertEqual(majority.leaves_majority(ev, n),
                                 widest >= n // 2 + 1, (n, mode))
                if mode != "ring":
                    for g in fields["groups"]:
                        self.assertTrue(clique([int(x[1:]) for x in g]))

    def test_shapes_on_three_nodes(self):
        seen = self.shapes(3)
        self.assertNotIn("ring", seen)
        cut, _ = seen["bridge"]
        self.assertEqual(len(cut), 2)


class NemesisFailures(unittest.TestCase):
    """A failed action or undo says when it began to act, so that what it
    did in part is counted (checkers/majority.py)."""

    class CutThenFail(FakeNet):
        def partition(self, cut):
            self.cut = cut
            raise RuntimeError("iptables: the third link")

    def test_a_partition_that_fails_part_way_says_when_it_began(self):
        with tempfile.TemporaryDirectory() as d:
            log = N.Log(d)
            nem = N.Nemesis(FakeCluster(3, 1), self.CutThenFail(),
                            random.Random(1), log, 3000)
            self.assertFalse(nem.start("partition"))
            log.close()
        fail = log.events[-1]
        self.assertEqual((fail["type"], fail["f"]), ("fail", "partition"))
        self.assertLessEqual(fail["began"], fail["time"])
        heal = {"time": fail["time"] + 10**9, "process": "nemesis",
                "type": "end", "f": "final-heal"}
        first = {"time": fail["began"] - 10**9, "process": 1}
        self.assertEqual(majority.healthy_windows([first, fail, heal], 3),
                         [(first["time"], fail["began"])])

    def test_a_failed_undo_says_when_it_began(self):
        def undo():
            raise RuntimeError("SIGCONT")
        with tempfile.TemporaryDirectory() as d:
            log = N.Log(d)
            nem = N.Nemesis(FakeCluster(3, 1), FakeNet(), random.Random(1),
                            log, 3000)
            nem.active = ("pause", undo, {"targets": ["n1"]})
            self.assertFalse(nem.end())
            log.close()
        fail = log.events[-1]
        self.assertEqual((fail["type"], fail["error"]),
                         ("fail", "undo: SIGCONT"))
        self.assertLessEqual(fail["began"], fail["time"])


class RestartServes(unittest.TestCase):
    """An undo that restarts nodes ends (its end event, from which the
    checkers count them healthy) once they serve again, not when their
    processes are spawned."""

    class Node(FakeNode):
        def __init__(self, i):
            super().__init__(i)
            self.up = True
            self.starts = 0

        def running(self):
            return self.up

        def kill(self):
            self.up = False

        def start(self):
            self.up = True
            self.starts += 1

    class Cluster(FakeCluster):
        """n2 leads (commit 50); a restarted node does not answer at the
        first STATUS, then lags (applied 40), then has caught up."""
        wait_serving = C.Cluster.wait_serving

        def __init__(self, never=False):
            super().__init__(3, 2)
            self.nodes = [RestartServes.Node(i) for i in (1, 2, 3)]
            self.polls = 0
            self.never = never
            self.serving_at = None

        def status(self):
            self.polls += 1
            out = []
            for n in self.nodes:
                st = {"node_id": n.id, "term": 4, "leader_id": 2,
                      "role": "follower", "applied_index": 50}
                if n.id == 2:
                    st.update(role="leader", ready=True, commit_index=50)
                elif n.starts and (self.never or self.polls < 3):
                    st = ({"error": "refused"} if self.polls < 2 else
                          dict(st, applied_index=40))
                out.append(st)
            if self.polls == 3 and not self.never:
                self.serving_at = N.mono_ns()
            return out

    def kill_and_undo(self, cl):
        with tempfile.TemporaryDirectory() as d:
            log = N.Log(d)
            nem = N.Nemesis(cl, FakeNet(), random.Random(3), log, 3000)
            self.assertTrue(nem.start("kill"))
            ok = nem.end()
            log.close()
        return ok, log.events[-1]

    def test_the_end_comes_once_the_node_serves(self):
        cl = self.Cluster()
        ok, end = self.kill_and_undo(cl)
        self.assertTrue(ok)
        self.assertEqual(end["type"], "end")
        self.assertEqual(cl.polls, 3)
        self.assertGreaterEqual(end["time"], cl.serving_at)
        self.assertLess(end["began"], cl.serving_at)

    def test_a_node_that_never_serves_fails_the_undo(self):
        cl = self.Cluster(never=True)
        saved = N.SERVE_TIMEOUT_S
        N.SERVE_TIMEOUT_S = 0.3
        try:
            ok, fail = self.kill_and_undo(cl)
        finally:
            N.SERVE_TIMEOUT_S = saved
        self.assertFalse(ok)
        self.assertEqual(fail["type"], "fail")
        self.assertIn("not serving", fail["error"])

    def test_who_serves(self):
        lead = {"node_id": 2, "role": "leader", "ready": True, "term": 4,
                "commit_index": 50}
        mark = C.leader_mark([lead], None)
        self.assertEqual(mark, (2, 4, 50))
        # The commit index is the one first seen while that leader leads.
        self.assertEqual(C.leader_mark([dict(lead, commit_index=60)], mark),
                         mark)
        self.assertIsNone(C.leader_mark([dict(lead, ready=False)], mark))
        f = {"node_id": 1, "role": "follower", "leader_id": 2, "term": 4,
             "applied_index": 50}
        self.assertTrue(C.serves(f, mark))
        self.assertTrue(C.serves(lead, mark))
        self.assertFalse(C.serves(dict(f, applied_index=49), mark))
        self.assertFalse(C.serves(dict(f, term=3), mark))
        self.assertFalse(C.serves(dict(f, leader_id=0), mark))
        self.assertFalse(C.serves(f, None))


class StatusOverTLS(unittest.TestCase):
    """status.py against a one-shot mutual TLS server holding a node
    certificate of deploy/make-certs."""

    @classmethod
    def setUpClass(cls):
        if shutil.which("openssl") is None:
            raise unittest.SkipTest("no openssl command")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.d = os.path.join(cls.tmp.name, "certs")
        subprocess.run([os.path.join(runner.REPO, "deploy", "make-certs"),
                        cls.d, "--nodes", "1", "--client", C.WORKER],
                       check=True, capture_output=True, timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def serve(self, answer):
        """A server on 127.0.0.1 answering one STATUS; returns its
        address and a list that gets the client certificate's CN."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(self.d, "node-1.pem"),
                            os.path.join(self.d, "node-1.key"))
        ctx.load_verify_locations(os.path.join(self.d, "ca.pem"))
        ctx.verify_mode = ssl.CERT_REQUIRED
        lsock = socket.create_server(("127.0.0.1", 0))
        seen = []

        def run():
            with lsock:
                conn, _ = lsock.accept()
                conn.settimeout(5)
                try:
                    with ctx.wrap_socket(conn, server_side=True) as s:
                        subject = dict(x[0] for x in
                                       s.getpeercert()["subject"])
                        seen.append(subject["commonName"])
                        n = struct.unpack(">I", s.recv(4))[0]
                        s.recv(n)
                        s.sendall(struct.pack(">I", len(answer)) + answer)
                except (OSError, ValueError) as e:
                    seen.append("error: %s" % e)

        t = threading.Thread(target=run)
        t.start()
        self.addCleanup(t.join, 10)
        return "127.0.0.1:%d" % lsock.getsockname()[1], seen

    def test_mutual_tls_status(self):
        info = field(1, 0, 1) + field(2, 2, b"leader") + field(14, 0, 1)
        addr, seen = self.serve(field(40, 2, field(11, 2, info)))
        ctx = status.tls_context(os.path.join(self.d, "ca.pem"),
                                 os.path.join(self.d, "client-%s.pem"
                                              % C.WORKER),
                                 os.path.join(self.d, "client-%s.key"
                                              % C.WORKER))
        st = status.ask_all([addr], timeout=5, ctx=ctx)[0]
        self.assertEqual(st.get("role"), "leader", st)
        self.assertEqual(seen, [C.WORKER])

    def test_without_a_client_certificate_refused(self):
        addr, seen = self.serve(b"")
        ctx = status.tls_context(os.path.join(self.d, "ca.pem"))
        st = status.ask(addr, timeout=5, ctx=ctx)
        self.assertIn("error", st)
        self.assertNotIn("role", st)


class SecurityOptions(unittest.TestCase):
    def test_secure_turns_everything_on(self):
        a = runner.parse(["--secure"])
        self.assertTrue(a.peer_tls and a.client_tls and a.auth)
        a = runner.parse(["--auth"])
        self.assertTrue(a.client_tls and a.auth)
        self.assertFalse(a.peer_tls)
        a = runner.parse([])
        self.assertFalse(a.peer_tls or a.client_tls or a.auth)

    def test_node_and_worker_arguments(self):
        class Net:
            run_id = "abcd"
            client_ns = "c"

            def node_ip(self, i):
                return "10.77.1.%d" % (10 + i)

            def exec_prefix(self, ns):
                return []

        with tempfile.TemporaryDirectory() as d:
            cl = C.Cluster(Net(), d, "raftlockd", "worker", 3,
                           client_tls="/certs", auth=True)
            a = cl.nodes[1].args()
            self.assertIn("--client-tls", a)
            self.assertEqual(a[a.index("--client-tls") + 1], "mutual")
            self.assertEqual(a[a.index("--client-tls-cert") + 1],
                             "/certs/node-2.pem")
            self.assertEqual(a[a.index("--auth-admin") + 1], C.ADMIN)
            self.assertNotIn("--peer-tls-cert", a)
            self.assertEqual(cl.tls_args(C.WORKER), [
                "--cacert", "/certs/ca.pem",
                "--cert", "/certs/client-%s.pem" % C.WORKER,
                "--key", "/certs/client-%s.key" % C.WORKER])
            plain = C.Cluster(Net(), d, "raftlockd", "worker", 3)
            self.assertEqual(plain.tls_args(C.WORKER), [])
            self.assertNotIn("--auth", plain.nodes[0].args())


class BrokenBuild(unittest.TestCase):
    """A broken server's run passes only if the checkers it is meant for
    caught it."""

    def verdict(self, failed, expect="", kind="fencing", nemesis_fail=False,
                per_lock=True):
        res = {n: {"valid": n not in failed} for n in runner.CHECKERS}
        res["liveness"]["per_lock_violations"] = int(
            per_lock and "liveness" in failed)
        res["summary"] = {"nemesis_failures": [1] if nemesis_fail else []}
        args = runner.parse(["--broken-kind", kind, "--expect-violation",
                             "--expect-caught", expect])
        return runner.expected_verdict(args, res)

    def test_each_expected_checker_must_catch_it(self):
        self.assertEqual(self.verdict({"fencing", "lease"}, "fencing,lease"),
                         0)
        self.assertEqual(self.verdict({"fencing"}, "fencing,lease"), 1)
        self.assertEqual(self.verdict({"fencing"}), 0)
        self.assertEqual(self.verdict({"waits"}), 1)
        self.assertEqual(self.verdict({"liveness"}, kind="dedup"), 0)
        self.assertEqual(self.verdict({"fencing"}, "fencing",
                                      nemesis_fail=True), 1)

    def test_liveness_expected_means_its_per_lock_rule(self):
        self.assertEqual(self.verdict({"liveness"}, "liveness", kind="dedup"),
                         0)
        # a stall seen only by the progress or heal rules proves nothing
        # of the per-lock rule a ghost holder must trip
        self.assertEqual(self.verdict({"liveness"}, "liveness", kind="dedup",
                                      per_lock=False), 1)

    def test_unknown_checker_refused(self):
        with self.assertRaises(SystemExit):
            runner.parse(["--expect-caught", "fencnig"])

    def test_expected_checkers_need_a_broken_server(self):
        with self.assertRaises(SystemExit):
            runner.parse(["--expect-caught", "fencing"])


class FakeCli:
    """Answers the raftlock command as a cluster with the grant would."""

    def __init__(self, grant_works=True):
        self.grant_works = grant_works
        self.calls = []

    def cli(self, who, argv):
        self.calls.append((who, argv))
        if argv[:2] == ["acl", "set"]:
            return (0, "") if self.grant_works else (1, "raftlock: acl: "
                                                     "permission denied")
        if argv[:2] == ["acl", "list"]:
            return 0, "%s\tjx/\tlock,read" % C.WORKER
        allowed = self.grant_works and who == C.WORKER and \
            argv[1].startswith("jx/")
        if allowed:
            return 3, "token 1 of '%s' is not current" % argv[1]
        return 1, "raftlock: check: permission denied (identity '%s' has " \
            "no 'read' on '%s')" % (who, argv[1])


class Membership(unittest.TestCase):
    """The membership nemesis reads `raftlock member list` and fails a step
    that does not come out."""

    class Cli:
        def __init__(self, out, rc=0):
            self.out, self.rc = out, rc

        def cli(self, who, argv, timeout=30, request_ms=5000):
            assert who == C.ADMIN and argv == ["member", "list"]
            return self.rc, self.out

    def test_reads_roles(self):
        out = ("ID\tROLE\tRAFT\tCLIENT\tMATCH\n"
               "1\tvoter\t10.77.1.11:7001\t10.77.1.11:7002\t90\t(leader)\n"
               "6\tstandby\t10.77.1.14:7001\t10.77.1.14:7002\t0\n")
        self.assertEqual(M.members(self.Cli(out)), {1: "voter", 6: "standby"})

    def test_a_step_that_does_not_come_out_fails(self):
        cl = self.Cli("ID\tROLE\tRAFT\tCLIENT\tMATCH\n"
                      "6\tstandby\ta:1\tb:2\t0\n")
        with self.assertRaises(M.MembershipError):
            M.wait_role(cl, 6, "voter", timeout=0.5)
        with self.assertRaises(M.MembershipError):
            M.members(self.Cli("raftlock: member list: timed out", rc=1))

    def test_refused_removal_is_tried_again(self):
        # Refused while a remaining voter does not answer: tried again,
        # a bounded number of times; any other failure fails at once.
        refused = ("raftlock: member remove 2: the call is not valid in the "
                   "object's current state (removing member 2 would leave 2 "
                   "voters of which 2 must answer for the cluster to commit, "
                   "and 1 did within 2000 ms (silent: 3): start them, or "
                   "remove a silent member first)")

        class Replies:
            def __init__(self, replies):
                self.replies, self.calls = list(replies), 0

            def cli(self, who, argv, timeout=30, request_ms=5000):
                self.calls += 1
                return self.replies.pop(0) if self.replies else (1, refused)

        wait, M.REMOVAL_RETRY_S = M.REMOVAL_RETRY_S, 0
        try:
            cl = Replies([(1, refused), (1, refused), (0, "")])
            M._member(cl, ["remove", "2"])
            self.assertEqual(cl.calls, 3)
            cl = Replies([])
            with self.assertRaises(M.MembershipError):
                M._member(cl, ["remove", "2"])
            self.assertEqual(cl.calls, M.REMOVAL_TRIES)
            cl = Replies([(1, "raftlock: member remove 2: timed out")])
            with self.assertRaises(M.MembershipError):
                M._member(cl, ["remove", "2"])
            self.assertEqual(cl.calls, 1)
        finally:
            M.REMOVAL_RETRY_S = wait

    def test_modes_take_turns(self):
        # Every mode comes within one round, whatever the seed.
        for seed in range(5):
            nem = N.Nemesis(FakeCluster(3, 1), FakeNet(), random.Random(seed),
                            None, 3000)
            turns = [N.MEMBERSHIP_MODES[(nem.membership_turn + k) %
                                        len(N.MEMBERSHIP_MODES)]
                     for k in range(len(N.MEMBERSHIP_MODES))]
            self.assertEqual(sorted(turns), sorted(N.MEMBERSHIP_MODES))


class AuthChecks(unittest.TestCase):
    def test_probes_pass_with_the_grant(self):
        fake = FakeCli()
        checks = runner.grant_and_probe(fake, "jx/", timeout=0)
        self.assertTrue(all(c["ok"] for c in checks), checks)
        self.assertEqual(fake.calls[0], (C.ADMIN, ["acl", "set", C.WORKER,
                                                   "jx/", "lock,read"]))

    def test_probes_fail_without_it(self):
        checks = runner.grant_and_probe(FakeCli(False), "jx/", timeout=0)
        failed = [c["step"] for c in checks if not c["ok"]]
        self.assertIn("grant", failed)
        self.assertIn("worker reads its prefix", failed)

    def test_a_worker_refused_fails_the_run(self):
        with tempfile.TemporaryDirectory() as d:
            h = os.path.join(d, "history.jsonl")
            with open(h, "w") as f:
                for ev in ({"process": 1, "type": "info", "f": "open",
                            "error": "ETLS", "time": 1},
                           {"process": "nemesis", "type": "fail",
                            "error": "EPERM", "time": 2}):
                    f.write(json.dumps(ev) + "\n")
            meta = {"auth_checks": [{"ok": True}]}
            r = runner.security_check(h, meta)
            self.assertTrue(r["valid"])
            self.assertEqual(r["worker_refusals"], {"open ETLS": 1})
            with open(h, "a") as f:
                f.write(json.dumps({"process": 2, "type": "info",
                                    "f": "acquire", "error": "EPERM",
                                    "time": 3}) + "\n")
            self.assertFalse(runner.security_check(h, meta)["valid"])


class Floors(unittest.TestCase):
    """A run that checked nothing fails, with the reason."""

    def results(self, name):
        from checkers import __main__ as checkers
        from checkers import history
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "checkers", "testdata", name)
        return checkers.run(history.load(path), liveness_bound_s=20.0)

    def test_a_run_that_checked_nothing_fails(self):
        # Six restart-alls, every acquire EUNKNOWN, one grant after the
        # final heal, no table read, no register access: every checker
        # passes.
        res = self.results("vacuous_restart_all.jsonl")
        self.assertTrue(res["summary"]["valid"])
        got = floors.check(res, "mutex")
        self.assertFalse(got["valid"])
        self.assertEqual(len(got["failures"]), 3, got["failures"])
        self.assertTrue(any("after a restart-all" in f
                            for f in got["failures"]))
        # The semaphore workload does not use the register.
        self.assertEqual(len(floors.check(res, "semaphore")["failures"]), 2)

    def test_healthy_histories_meet_the_floors(self):
        for name in ("clean.jsonl", "durability_clean.jsonl"):
            got = floors.check(self.results(name), "mutex")
            self.assertTrue(got["valid"], got["failures"])
        res = self.results("election_clean.jsonl")
        self.assertEqual(res["observe"]["observations"], 6)
        res["summary"]["op_counts"]["acquire:ok"] = 0
        self.assertIn("no acquire was granted: no checker had a grant to "
                      "check", floors.check(res, "election")["failures"])


class AfterTheHeal(unittest.TestCase):
    """What the runner waits for once the faults are healed."""

    class Workers:
        def __init__(self, d, events):
            self.workers = []
            for wid, evs in events.items():
                w = type("W", (), {})()
                w.wid, w.history = wid, os.path.join(d, "w%d.jsonl" % wid)
                with open(w.history, "w") as f:
                    for ev in evs:
                        f.write(json.dumps(ev) + "\n")
                self.workers.append(w)

    def progress(self, events, heal=100):
        with tempfile.TemporaryDirectory() as d:
            p = runner.LockProgress(heal)
            p.update(self.Workers(d, events))
            return p

    def test_a_table_read_must_start_after_the_heal(self):
        read = [{"time": 90, "process": 6, "type": "invoke", "f": "holders"},
                {"time": 110, "process": 6, "type": "ok", "f": "holders"}]
        self.assertFalse(self.progress({6: read}).table_read)
        read += [{"time": 120, "process": 6, "type": "invoke",
                  "f": "holders"}]
        self.assertFalse(self.progress({6: read}).table_read)
        read += [{"time": 130, "process": 6, "type": "ok", "f": "holders"}]
        p = self.progress({6: read, 1: [
            {"time": 105, "process": 1, "type": "invoke", "f": "acquire",
             "lock": "a"}]})
        self.assertTrue(p.table_read)
        self.assertFalse(p.every_lock_granted())

    def test_a_suite_plots_failed_runs_only(self):
        one = runner.parse(["--workload", "mutex"])
        suite = runner.parse(["--suite", "ci"])
        self.assertTrue(runner.want_plots(one, True))
        self.assertFalse(runner.want_plots(suite, True))
        self.assertTrue(runner.want_plots(suite, False))
        never = runner.parse(["--suite", "ci", "--plots", "never"])
        self.assertFalse(runner.want_plots(never, False))


if __name__ == "__main__":
    unittest.main()
