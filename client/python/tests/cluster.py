"""A real raftlockd cluster on free loopback ports, for the tests.

Every node is a child process started from the build tree's raftlockd
(RAFTLOCKD, or <repo>/build/bin/raftlockd) and stopped by stop(), which
unittest's addClassCleanup / addCleanup always call; PR_SET_PDEATHSIG is
not reachable from Python, so atexit stops whatever a crash left too.
"""

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import raftlock

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
_running = []


def raftlockd_path():
    return os.environ.get("RAFTLOCKD") or os.path.join(REPO, "build", "bin", "raftlockd")


def _free_port(taken):
    """A loopback port nothing listens on now (bound, then let go)."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in taken:
            taken.add(port)
            return port
    raise RuntimeError("no free loopback port")


class Cluster:
    def __init__(self, n=3, election_ms=300, extra_args=(), client_options=None):
        """extra_args: more raftlockd flags ("{id}" in one is the node's
        id; "{dir}" the cluster's scratch directory); client_options: what
        a client needs to talk to it (TLS files, token)."""
        self.n = n
        self.election_ms = election_ms
        self.dir = tempfile.mkdtemp(prefix="raftlock-py-")
        self.extra_args = list(extra_args)
        self.client_options = dict(client_options or {})
        taken = set()
        self.raft_ports = [_free_port(taken) for _ in range(n)]
        self.client_ports = [_free_port(taken) for _ in range(n)]
        self.metrics_ports = [_free_port(taken) for _ in range(n)]
        self.addresses = [f"127.0.0.1:{p}" for p in self.client_ports]
        self.procs = [None] * n
        self.name = f"pytest-{os.getpid()}"

    @property
    def endpoints(self):
        return ",".join(self.addresses)

    def _argv(self, i):
        argv = [raftlockd_path(), "--id", str(i + 1), "--data-dir",
                os.path.join(self.dir, f"n{i + 1}"), "--cluster", self.name,
                "--metrics-address", f"127.0.0.1:{self.metrics_ports[i]}",
                "--election-timeout", str(self.election_ms),
                "--heartbeat-timeout", str(self.election_ms // 10), "--log-level", "warn",
                "--bootstrap"]  # a new cluster on first start; ignored after
        argv += [a.replace("{id}", str(i + 1)).replace("{dir}", self.dir)
                 for a in self.extra_args]
        for m in range(self.n):
            argv += ["--member", f"{m + 1},127.0.0.1:{self.raft_ports[m]},"
                     f"127.0.0.1:{self.client_ports[m]}"]
        return argv

    def start(self, timeout=20.0):
        _running.append(self)
        for i in range(self.n):
            log = open(os.path.join(self.dir, f"n{i + 1}.log"), "ab")
            self.procs[i] = subprocess.Popen(self._argv(i), stdout=log, stderr=log,
                                             stdin=subprocess.DEVNULL)
            log.close()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=20.0):
        """Waits until some node is a ready leader (asked through the library)."""
        end = time.monotonic() + timeout
        with raftlock.Client(self.endpoints, request_timeout=1, connect_timeout=0.5,
                             **self.client_options) as c:
            while time.monotonic() < end:
                for addr in self.addresses:
                    try:
                        st = c.status(addr)
                    except raftlock.RaftlockError:
                        continue
                    if st.role == "leader" and st.ready:
                        return addr
                time.sleep(0.05)
        raise RuntimeError(f"no ready leader within {timeout} s (logs in {self.dir})")

    def leader(self):
        """Index of the node that says it is the ready leader."""
        addr = self.wait_ready()
        return self.addresses.index(addr)

    def signal(self, i, sig):
        self.procs[i].send_signal(sig)

    def stop(self):
        """Stops every node (SIGCONT, SIGTERM, SIGKILL after 5 s) and removes
        the data. Idempotent. Raises, keeping the logs, when a node did not
        exit 0 on SIGTERM or a log holds a sanitizer report."""
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        problems = []
        for i, p in enumerate(self.procs):
            if p is None:
                continue
            try:
                rc = p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
            if rc != 0:
                problems.append(f"node {i + 1} exited with {rc}")
            self.procs[i] = None
            with open(os.path.join(self.dir, f"n{i + 1}.log"), errors="replace") as log:
                if any(m in log.read() for m in ("ERROR: AddressSanitizer", "runtime error:",
                                                 "ERROR: LeakSanitizer")):
                    problems.append(f"node {i + 1}: sanitizer report")
        if self in _running:
            _running.remove(self)
        if problems:
            raise RuntimeError(f"cluster: {'; '.join(problems)} (logs in {self.dir})")
        shutil.rmtree(self.dir, ignore_errors=True)


def revoke(client, name, token=0):
    """Revokes grants of `name` at once (raftlock_revoke, which the package
    does not offer): what an operator's `raftlock revoke` does."""
    fn = raftlock._native.lib.raftlock_revoke
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint,
                   ctypes.c_void_p]
    client._call(fn, name.encode(), token, 0, None)


def start_for_module(**options):
    """A started cluster that the test module's end stops (setUpModule)."""
    c = Cluster(**options)
    unittest.addModuleCleanup(c.stop)
    return c.start()


@atexit.register
def _stop_all():
    for c in list(_running):
        try:
            c.stop()
        except RuntimeError as e:
            print(e, file=sys.stderr)
