"""The processes of a run: raftlockd nodes, the fenced register and the
workers, each started inside the run's namespaces and known by PID. Only
these PIDs are ever signalled."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from . import netns

RAFT_PORT = 7001
CLIENT_PORT = 7002
REGISTER_PORT = 7070
# Identities of a run with --auth (certificate CNs, deploy/make-certs
# --client): the admin that grants, the workers, and one with no rules.
ADMIN = "jepsen-admin"
WORKER = "jepsen-worker"
OUTSIDER = "jepsen-outsider"
FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                 "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
                 "/usr/lib/faketime/libfaketimeMT.so.1")


def faketime_lib():
    for p in FAKETIME_LIBS:
        if os.path.exists(p):
            return p
    return None


class Proc:
    """A child started by the harness."""

    def __init__(self, name, args, log_path, env=None):
        self.name = name
        self.log = open(log_path, "ab")
        self.popen = subprocess.Popen(args, stdout=self.log,
                                      stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env=env,
                                      start_new_session=True)
        self.pid = self.popen.pid
        self.paused = False

    def running(self):
        return self.popen.poll() is None

    def signal(self, sig):
        if self.running():
            os.kill(self.pid, sig)
            return True
        return False

    def kill(self, timeout=10):
        if self.running():
            if self.paused:
                self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()

    def stop(self, timeout=10):
        """SIGTERM, then SIGKILL after `timeout` seconds."""
        if self.running():
            if self.paused:
                self.signal(signal.SIGCONT)
                self.paused = False
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


class Node:
    """One slot: a namespace and address (i), and the member that runs
    there (id: i at first; a new one each time the slot is reused, since
    member ids are never reused)."""

    def __init__(self, cluster, i):
        self.c = cluster
        self.i = i
        self.id = i
        self.joining = False  # added at run time: starts with --join
        self.dir = os.path.join(cluster.run_dir, "nodes", "n%d" % i)
        self.data = os.path.join(self.dir, "data")
        os.makedirs(self.data, exist_ok=True)
        self.proc = None
        self.starts = 0
        self.crashes = []  # exits the harness did not cause
        self.clock_file = os.path.join(self.dir, "faketime")
        self.rate = None

    @property
    def raft_address(self):
        return "%s:%d" % (self.c.net.node_ip(self.i), RAFT_PORT)

    @property
    def client_address(self):
        return "%s:%d" % (self.c.net.node_ip(self.i), CLIENT_PORT)

    def args(self):
        a = [self.c.raftlockd, "--id", str(self.id), "--data-dir", self.data,
             "--raft-address", self.raft_address,
             "--client-address", self.client_address,
             "--cluster", "jepsen-" + self.c.net.run_id]
        if self.joining:
            # A member added at run time (docs/OPERATIONS.md): after its
            # first start, --join is ignored.
            a += ["--join", ",".join(n.client_address for n in self.c.nodes
                                     if n is not self)]
        else:
            a += ["--bootstrap"]  # ignored once the data directory has a log
            for n in self.c.boot:
                a += ["--member", "%d,%s,%s" % (n.id, n.raft_address,
                                                n.client_address)]
        if self.c.peer_tls:
            d = self.c.peer_tls
            a += ["--peer-tls-cert", os.path.join(d, "node-%d.pem" % self.id),
                  "--peer-tls-key", os.path.join(d, "node-%d.key" % self.id),
                  "--peer-tls-ca", os.path.join(d, "ca.pem")]
        if self.c.client_tls:
            d = self.c.client_tls
            a += ["--client-tls", "mutual",
                  "--client-tls-cert", os.path.join(d, "node-%d.pem" % self.id),
                  "--client-tls-key", os.path.join(d, "node-%d.key" % self.id),
                  "--client-tls-ca", os.path.join(d, "ca.pem")]
        if self.c.auth:
            a += ["--auth", "on", "--auth-admin", ADMIN]
        return a + self.c.server_extra

    def env(self):
        env = dict(os.environ)
        lib = faketime_lib() if self.c.faketime else None
        if lib is None:
            return env
        env["LD_PRELOAD"] = lib
        if self.rate is not None:
            # Monotonic and boot clocks run at `rate` from this start on.
            env["FAKETIME"] = "+0 x%g" % self.rate
        else:
            # Wall-clock jumps through the file; monotonic stays true.
            if not os.path.exists(self.clock_file):
                with open(self.clock_file, "w") as f:
                    f.write("+0\n")
            env["FAKETIME_TIMESTAMP_FILE"] = self.clock_file
            env["FAKETIME_CACHE_DURATION"] = "1"
            env["DONT_FAKE_MONOTONIC"] = "1"
        return env

    def check_crash(self):
        """Records an exit of the current process that no nemesis caused
        (a crash or an abort of raftlockd). Returns it or None."""
        p = self.proc
        if p is None or p.running() or getattr(p, "reaped", False):
            return None
        p.reaped = True
        crash = {"node": "n%d" % self.i, "pid": p.pid,
                 "returncode": p.popen.returncode, "time": time.monotonic_ns()}
        self.crashes.append(crash)
        return crash

    def start(self):
        self.check_crash()
        self.starts += 1
        self.proc = Proc("n%d" % self.i,
                         self.c.net.exec_prefix(self.c.net.node_ns(self.i))
                         + self.args(),
                         os.path.join(self.dir, "raftlockd.log"),
                         env=self.env())
        with open(os.path.join(self.dir, "raftlockd.log"), "a") as f:
            f.write("\n=== harness: start %d pid %d rate %s ===\n" %
                    (self.starts, self.proc.pid, self.rate))

    def running(self):
        return self.proc is not None and self.proc.running()

    def kill(self):
        if self.proc is not None:
            self.check_crash()
            self.proc.reaped = True
            self.proc.kill()

    def stop(self):
        if self.proc is not None:
            self.check_crash()
            self.proc.reaped = True
            self.proc.stop(10)

    def wipe(self, new_id):
        """The machine is replaced: the data directory is gone, and the
        slot's next member is new_id, started with --join."""
        self.kill()
        shutil.rmtree(self.data, ignore_errors=True)
        os.makedirs(self.data, exist_ok=True)
        self.id = new_id
        self.joining = True
        with open(os.path.join(self.dir, "raftlockd.log"), "a") as f:
            f.write("\n=== harness: data wiped; member %d next ===\n" % new_id)


class Cluster:
    def __init__(self, net, run_dir, raftlockd, worker, n_nodes,
                 faketime=False, server_extra=None, peer_tls=None,
                 client_tls=None, auth=False, cli=None, spares=0):
        self.net = net
        self.peer_tls = peer_tls  # certificates directory, or None
        # Certificates directory for client-tls = mutual, or None; auth = on
        # needs it (identities are client certificate CNs).
        self.client_tls = client_tls
        self.auth = auth
        self.cli_bin = cli  # the raftlock command, for the grants
        self.run_dir = run_dir
        self.raftlockd = raftlockd
        self.worker_bin = worker
        self.faketime = faketime
        self.server_extra = server_extra or []
        # Every slot; the members now (nodes, in the raft configuration) and
        # the slots free for the membership nemesis (spares); the members
        # that bootstrapped the cluster (boot, their --member list).
        self.slots = [Node(self, i) for i in range(1, n_nodes + spares + 1)]
        self.nodes = self.slots[:n_nodes]
        self.spares = self.slots[n_nodes:]
        self.boot = list(self.nodes)
        self.next_id = n_nodes + spares + 1  # ids are never reused
        self.workers = []
        self.register = None
        self.worker_dir = os.path.join(run_dir, "workers")
        os.makedirs(self.worker_dir, exist_ok=True)

    def addresses(self):
        return ",".join(n.client_address for n in self.nodes)

    def node_by_id(self, member_id):
        for n in self.nodes:
            if n.id == member_id:
                return n
        raise KeyError("no member %s" % member_id)

    def new_id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def tls_args(self, identity):
        """The client's TLS flags presenting `identity`'s certificate (none
        without client TLS)."""
        if not self.client_tls:
            return []
        d = self.client_tls
        return ["--cacert", os.path.join(d, "ca.pem"),
                "--cert", os.path.join(d, "client-%s.pem" % identity),
                "--key", os.path.join(d, "client-%s.key" % identity)]

    def cli(self, identity, args, timeout=30, request_ms=5000):
        """Runs the raftlock command as `identity` from the client
        namespace: (exit status, stdout + stderr)."""
        a = self.net.exec_prefix(self.net.client_ns) + [
            self.cli_bin, "--endpoints", self.addresses(),
            "--timeout", str(request_ms)] + self.tls_args(identity) + args
        try:
            p = subprocess.run(a, capture_output=True, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None, "timed out after %ds" % timeout
        return p.returncode, (p.stdout + p.stderr).strip()

    def start_register(self):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.register_log = os.path.join(self.run_dir, "register.jsonl")
        self.register = Proc(
            "register",
            self.net.exec_prefix(self.net.client_ns) +
            [sys.executable, os.path.join(here, "register.py"),
             "--listen", "127.0.0.1:%d" % REGISTER_PORT,
             "--log", self.register_log],
            os.path.join(self.run_dir, "register.out"))

    def start_nodes(self):
        for n in self.nodes:
            n.start()

    def status(self, timeout=8):
        """Each node's view, from inside the client namespace: a list of
        dicts (with "error" for a node that did not answer)."""
        here = os.path.dirname(os.path.abspath(__file__))
        try:
            out = subprocess.run(
                self.net.exec_prefix(self.net.client_ns) +
                [sys.executable, os.path.join(here, "status.py")] +
                self.tls_args(WORKER) +
                [n.client_address for n in self.nodes],
                capture_output=True, text=True, timeout=timeout)
            return json.loads(out.stdout)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            return []

    def leader(self):
        """The node id of the ready leader with the highest term, or None."""
        best = None
        for st in self.status():
            if st.get("role") == "leader" and st.get("ready", True):
                if best is None or st.get("term", 0) > best.get("term", 0):
                    best = st
        return best.get("node_id") if best else None

    def wait_serving(self, nodes, timeout):
        """Waits until each of `nodes` serves (see serves()), at most about
        `timeout` seconds; returns the ids of those that do not."""
        deadline = time.monotonic() + timeout
        mark = None
        while nodes:
            sts = self.status()
            mark = leader_mark(sts, mark)
            by_id = {st.get("node_id"): st for st in sts if "error" not in st}
            left = [n.id for n in nodes if not serves(by_id.get(n.id), mark)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.1)
        return []

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.leader() is not None:
                return True
            # Asked often: the first election takes 1-2 s, and every run
            # waits for it.
            time.sleep(0.1)
        return False

    def start_worker(self, wid, workload, args):
        out = os.path.join(self.worker_dir, "w%d.jsonl" % wid)
        a = self.net.exec_prefix(self.net.client_ns) + [
            self.worker_bin, "--id", str(wid), "--workload", workload,
            "--addresses", self.addresses(), "--out", out,
            "--register", "127.0.0.1:%d" % REGISTER_PORT] + \
            self.tls_args(WORKER) + args
        p = Proc("w%d" % wid, a, os.path.join(self.worker_dir,
                                               "w%d.log" % wid))
        p.history = out
        p.wid = wid
        p.workload, p.args, p.killed = workload, args, False
        self.workers.append(p)
        return p

    def replace_worker(self, w):
        """A new worker in place of w (killed): same workload and
        options, the next free id, so that each history process is one
        process."""
        wid = max(x.wid for x in self.workers) + 1
        return self.start_worker(wid, w.workload, w.args)

    def holding_workers(self):
        """Workers whose last logged event says they hold a lock now."""
        out = []
        for w in self.workers:
            if w.paused or not w.running():
                continue
            last = _last_line(w.history)
            if last is None:
                continue
            f, t = last.get("f"), last.get("type")
            if (f == "acquire" and t == "ok") or \
                    (f in ("read", "write") and last.get("token")):
                out.append(w)
        return out

    def worker_exits(self):
        """Each worker's exit status: 0 for a clean stop; a negative
        signal number or a non-zero status for a crash or a hang."""
        return {"w%d" % w.wid: w.popen.returncode for w in self.workers
                if not w.killed}

    def stop_workers(self, timeout=20):
        for w in self.workers:
            if w.paused:
                w.signal(signal.SIGCONT)
                w.paused = False
            w.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for w in self.workers:
            left = max(0.1, deadline - time.monotonic())
            try:
                w.popen.wait(left)
            except subprocess.TimeoutExpired:
                w.hung = True
            w.kill()

    def teardown(self):
        if self.register is not None:
            # Told first: its server notices within its poll interval,
            # while the others are killed.
            self.register.signal(signal.SIGTERM)
        for w in self.workers:
            w.kill()
        for n in self.slots:
            n.kill()
        if self.register is not None:
            self.register.stop(5)


def leader_mark(statuses, mark):
    """(id, term, commit index) of the ready leader with the highest term
    in `statuses`, or None; `mark` is kept while the same leader leads,
    so the commit index is the one it had when first seen."""
    best = None
    for st in statuses:
        if st.get("role") == "leader" and st.get("ready"):
            if best is None or st.get("term", 0) > best.get("term", 0):
                best = st
    if best is None:
        return None
    key = (best.get("node_id"), best.get("term"))
    if mark is not None and mark[:2] == key:
        return mark
    return key + (best.get("commit_index", 0),)


def serves(st, mark):
    """Whether a node's STATUS says it serves, as raftlockd's /readyz
    judges it (docs/OPERATIONS.md): it is the ready leader `mark`, or it
    follows that leader in its term and has applied what the leader had
    committed when first seen."""
    if st is None or mark is None:
        return False
    lid, term, commit = mark
    if st.get("node_id") == lid:
        return st.get("role") == "leader" and bool(st.get("ready"))
    return (st.get("leader_id") == lid and st.get("term") == term
            and st.get("applied_index", 0) >= commit)


def last_event(path):
    """The last event a worker logged, or None."""
    return _last_line(path)


def _last_line(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 4096))
            lines = f.read().splitlines()
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError, IndexError):
        return None
