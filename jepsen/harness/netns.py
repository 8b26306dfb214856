"""The run's private network: one namespace per node, one for the clients
(workers and the fenced register), one holding the bridge that joins them
through veth pairs. Addresses are in 10.77.X.0/24 and exist only inside
these namespaces. Partitions are iptables DROP rules in a chain of the
run's own (RLJ) inside the node namespaces.

Every name carries the run id (rlj<id>-...), so parallel runs never meet,
and a stale run's namespaces are found by that prefix.
"""

import os
import re
import signal
import subprocess
import time

PREFIX = "rlj"
STATE_DIR = "/run/raftlock-jepsen"
CHAIN = "RLJ"
NAME_RE = re.compile(r"^%s([0-9a-f]{4})-" % PREFIX)


class NetError(Exception):
    pass


def sh(args, timeout=15, check=True, stdin=None):
    """Runs a command, bounded in time, with stdin (text) as its input;
    returns stdout."""
    try:
        p = subprocess.run(args, capture_output=True, text=True,
                           timeout=timeout, input=stdin)
    except subprocess.TimeoutExpired:
        raise NetError("timed out: %s" % " ".join(args))
    except OSError as e:
        raise NetError("%s: %s" % (args[0], e))
    if check and p.returncode != 0:
        raise NetError("%s: %s" % (" ".join(args), p.stderr.strip()))
    return p.stdout


def available():
    """(True, None) when namespaces, veth, bridges and iptables work here."""
    if os.geteuid() != 0:
        return False, "not root"
    for tool in ("ip", "iptables"):
        if not any(os.access(os.path.join(d, tool), os.X_OK)
                   for d in os.environ.get("PATH", "").split(":") +
                   ["/usr/sbin", "/sbin"]):
            return False, "%s not found" % tool
    return True, None


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _ns_pids(ns):
    try:
        out = sh(["ip", "netns", "pids", ns], check=False)
    except NetError:
        return []
    return [int(x) for x in out.split() if x.isdigit()]


def _kill_ns_processes(ns):
    """Stops the processes a dead run left in its own namespace."""
    pids = _ns_pids(ns)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p)]
        time.sleep(0.05)


def cleanup_stale(log=print):
    """Removes namespaces of earlier runs whose runner is gone."""
    try:
        names = [l.split()[0] for l in
                 sh(["ip", "netns", "list"]).splitlines() if l.strip()]
    except NetError as e:
        log("stale cleanup: %s" % e)
        return 0
    removed = 0
    for ns in names:
        m = NAME_RE.match(ns)
        if not m:
            continue
        run_id = m.group(1)
        pidfile = os.path.join(STATE_DIR, run_id + ".pid")
        try:
            with open(pidfile) as f:
                if _alive(int(f.read().strip())):
                    continue  # a run in progress
        except (OSError, ValueError):
            pass
        _kill_ns_processes(ns)
        sh(["ip", "netns", "del", ns], check=False)
        removed += 1
        try:
            os.unlink(pidfile)
        except OSError:
            pass
    if removed:
        log("stale cleanup: removed %d namespaces" % removed)
    return removed


class Network:
    def __init__(self, run_id, n_nodes):
        self.run_id = run_id
        self.n = n_nodes
        self.subnet = int(run_id, 16) % 250 + 1
        self.created = []  # namespaces, to delete in reverse
        self.bridge_ns = "%s%s-br" % (PREFIX, run_id)
        self.client_ns = "%s%s-c" % (PREFIX, run_id)
        self.partitioned = False

    def node_ns(self, i):
        return "%s%s-n%d" % (PREFIX, self.run_id, i)

    def node_ip(self, i):
        return "10.77.%d.%d" % (self.subnet, 10 + i)

    @property
    def client_ip(self):
        return "10.77.%d.100" % self.subnet

    def exec_prefix(self, ns):
        return ["ip", "netns", "exec", ns]

    def create(self):
        """The namespaces, the bridge, a veth pair for each end and the
        partition chain in each node: some 40 ip and iptables commands,
        run as one ip batch per namespace and one iptables-restore per
        node (a process each took a second of every run)."""
        os.makedirs(STATE_DIR, exist_ok=True)
        with open(os.path.join(STATE_DIR, self.run_id + ".pid"), "w") as f:
            f.write("%d\n" % os.getpid())
        ends = [(self.client_ns, "c", self.client_ip)] + [
            (self.node_ns(i), "n%d" % i, self.node_ip(i))
            for i in range(1, self.n + 1)]
        # Listed before they exist: destroy() removes whatever was made.
        self.created = [self.bridge_ns] + [ns for ns, _, _ in ends]
        host = ["netns add %s" % ns for ns in self.created]
        bridge = ["link set lo up", "link add br0 type bridge",
                  "link set br0 up"]
        for ns, tag, _ in ends:
            veth = "rj%s%s" % (self.run_id, tag)
            host.append("link add %s netns %s type veth peer name eth0 "
                        "netns %s" % (veth, self.bridge_ns, ns))
            bridge.append("link set %s master br0 up" % veth)
        sh(["ip", "-batch", "-"], stdin="\n".join(host))
        sh(["ip", "-n", self.bridge_ns, "-batch", "-"],
           stdin="\n".join(bridge))
        for ns, _, ip in ends:
            sh(["ip", "-n", ns, "-batch", "-"],
               stdin="link set lo up\naddr add %s/24 dev eth0\n"
               "link set eth0 up" % ip)
        chain = "*filter\n:{0} - [0:0]\n-I INPUT -j {0}\n" \
            "-I OUTPUT -j {0}\nCOMMIT\n".format(CHAIN)
        for ns, _, _ in ends[1:]:
            sh(self.exec_prefix(ns) + ["iptables-restore", "-w", "5",
                                       "--noflush"], stdin=chain)

    # ------------------------------------------------------ partitions --

    def _rules(self, i):
        out = sh(self.exec_prefix(self.node_ns(i)) +
                 ["iptables", "-w", "5", "-S", CHAIN])
        return [l for l in out.splitlines() if l.startswith("-A")]

    def partition(self, cut):
        """cut: {node: set of nodes it must not reach}. Symmetric rules are
        the caller's choice. Verifies every rule is in place."""
        for i, others in cut.items():
            ns = self.node_ns(i)
            for j in sorted(others):
                ip = self.node_ip(j)
                for flag in ("-s", "-d"):
                    sh(self.exec_prefix(ns) +
                       ["iptables", "-w", "5", "-A", CHAIN, flag, ip, "-j",
                        "DROP"])
        self.partitioned = True
        for i, others in cut.items():
            if len(self._rules(i)) != 2 * len(others):
                raise NetError("partition rules of n%d not in place" % i)

    def heal(self):
        for i in range(1, self.n + 1):
            sh(self.exec_prefix(self.node_ns(i)) +
               ["iptables", "-w", "5", "-F", CHAIN])
        self.partitioned = False
        for i in range(1, self.n + 1):
            if self._rules(i):
                raise NetError("partition rules of n%d not flushed" % i)

    def destroy(self):
        for ns in reversed(self.created):
            _kill_ns_processes(ns)
            sh(["ip", "netns", "del", ns], check=False)
        self.created = []
        try:
            os.unlink(os.path.join(STATE_DIR, self.run_id + ".pid"))
        except OSError:
            pass
