"""Nemeses: the faults a run injects, each with an undo.

Every action logs a "start" event when it has acted (and was verified),
an "end" event when it was undone (a node it restarted serves again), or
a "fail" event when it or its undo could not finish; a run with any
"fail" fails. Each carries `began`, when the action or its undo began to
act: a failure may have acted in part. Events are history lines (see
jepsen/README.md) with process "nemesis".
"""

import json
import os
import signal
import time

from . import cluster as C
from . import membership as M

ALL = ("kill", "pause", "partition", "clock", "restart-all", "membership")
# What the membership nemesis does, in turn (from a seeded starting point),
# each verified: grow by one member and shrink back (alone, while another
# member is killed, or while the leader is partitioned away); replace a
# member whose machine is lost; remove the leader and add a new member.
MEMBERSHIP_MODES = ("replace", "grow+kill", "remove-leader", "grow+partition",
                    "grow")
# Opt-in (not in "all"): SIGKILL of a worker that holds a lock, which is
# then replaced by a new worker (a new process id in the history); meant
# for workers in bound sessions (--bind-ms), whose locks pass on within
# the grace.
# "revoke": an admin revokes the grant a worker holds (`raftlock revoke
# LOCK --token T`); the checkers end that grant at the revocation.
EXTRA = ("worker-kill", "revoke")
# A node restarted by an undo serves again within this (it keeps its data:
# an election at most, and the entries it missed); else the undo fails.
SERVE_TIMEOUT_S = 20


def mono_ns():
    return time.monotonic_ns()


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def proc_env(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return dict(x.decode(errors="replace").split("=", 1)
                        for x in f.read().split(b"\0") if b"=" in x)
    except OSError:
        return {}


class NemesisError(Exception):
    pass


class Log:
    def __init__(self, run_dir):
        self.events = []
        self.jsonl = open(os.path.join(run_dir, "nemesis.jsonl"), "w")
        self.text = open(os.path.join(run_dir, "nemesis.log"), "w")
        self.t0 = mono_ns()

    def event(self, typ, f, **kw):
        ev = {"time": mono_ns(), "process": "nemesis", "type": typ, "f": f}
        ev.update(kw)
        self.events.append(ev)
        self.jsonl.write(json.dumps(ev, sort_keys=True) + "\n")
        self.jsonl.flush()
        shown = dict(kw)
        if "began" in shown:  # seconds before the start event
            shown["began"] = "%+.3fs" % ((shown["began"] - ev["time"]) / 1e9)
        self.text.write("%9.3fs %-5s %-11s %s\n" % (
            (ev["time"] - self.t0) / 1e9, typ, f,
            " ".join("%s=%s" % (k, v) for k, v in sorted(shown.items()))))
        self.text.flush()
        return ev

    def close(self):
        self.jsonl.close()
        self.text.close()


class Nemesis:
    """Acts on the cluster. start() returns the undo state or raises."""

    def __init__(self, cluster, net, rng, log, ttl_ms):
        self.c = cluster
        self.net = net
        self.rng = rng
        self.log = log
        self.ttl_ms = ttl_ms
        self.active = None  # (name, undo, fields)
        self.clock_modes = ["jump", "rate"]
        self.clock_rates = [0.5, 0.9, 0.995, 1.005, 1.1, 2.0]
        self.membership_turn = rng.randrange(len(MEMBERSHIP_MODES))

    # -------------------------------------------------------- helpers --

    def _ids(self):
        """The member ids (a slot's member changes with membership)."""
        return [n.id for n in self.c.nodes]

    def _leader_or_random(self):
        lid = self.c.leader()
        if lid is None:
            return self.rng.choice(self._ids()), False
        return lid, True

    def _node(self, i):
        return self.c.node_by_id(i)

    def _holding_workers_soon(self):
        """The workers holding a lock, waiting up to ~4 s for one."""
        holders = []
        for _ in range(40):
            holders = self.c.holding_workers()
            if holders:
                break
            time.sleep(0.1)
        return holders

    def _restart(self, nodes):
        """Starts `nodes` and returns once each serves again, so that the
        undo's end event is where the checkers may count them healthy."""
        for n in nodes:
            n.start()
        left = self.c.wait_serving(nodes, SERVE_TIMEOUT_S)
        if left:
            raise NemesisError("%s not serving %ds after the restart" % (
                ",".join("n%d" % i for i in left), SERVE_TIMEOUT_S))

    def hold_seconds(self, name):
        ttl = self.ttl_ms / 1000.0
        if name == "pause":
            return ttl * 1.5 + self.rng.uniform(0.5, ttl)
        if name == "restart-all":
            return self.rng.uniform(1.0, 3.0)
        if name == "clock":
            return self.rng.uniform(1.5 * ttl, 3 * ttl)
        return self.rng.uniform(3.0, 8.0)

    # --------------------------------------------------------- actions --

    def _kill(self):
        ids = self._ids()
        mode = self.rng.choice(["random", "leader", "minority"])
        if mode == "leader":
            lid, known = self._leader_or_random()
            targets = [lid]
            if not known:
                mode = "leader-unknown-random"
        elif mode == "minority":
            targets = self.rng.sample(ids, max(1, (len(ids) - 1) // 2))
        else:
            targets = [self.rng.choice(ids)]
        for i in targets:
            n = self._node(i)
            if not n.running():
                raise NemesisError("n%d is not running" % i)
            n.kill()
            if n.running():
                raise NemesisError("n%d survived SIGKILL" % i)

        def undo():
            self._restart([self._node(i) for i in targets])
        return undo, {"mode": mode, "targets": ["n%d" % i for i in targets]}

    def _pause(self):
        mode = self.rng.choice(["leader", "node", "worker", "worker"])
        if mode.startswith("worker"):
            holders = self._holding_workers_soon()
            if holders:
                procs = [self.rng.choice(holders)]
                label = ["w%d" % procs[0].wid]
            else:
                mode = "worker-not-holding"
                live = [w for w in self.c.workers
                        if w.running() and not w.paused]
                if not live:
                    raise NemesisError("no worker to pause")
                procs = [self.rng.choice(live)]
                label = ["w%d" % procs[0].wid]
        else:
            if mode == "leader":
                i, known = self._leader_or_random()
                if not known:
                    mode = "leader-unknown-node"
            else:
                i = self.rng.choice(self._ids())
            n = self._node(i)
            if not n.running():
                raise NemesisError("n%d is not running" % i)
            procs = [n.proc]
            label = ["n%d" % i]
        for p in procs:
            p.signal(signal.SIGSTOP)
            p.paused = True
        time.sleep(0.05)
        for p in procs:
            if proc_state(p.pid) != "T":
                raise NemesisError("%s not stopped" % p.name)

        def undo():
            for p in procs:
                p.signal(signal.SIGCONT)
                p.paused = False
        return undo, {"mode": mode, "targets": label}

    def _partition(self):
        ids = list(self._ids())
        n = len(ids)
        modes = ["isolate-leader", "halves", "bridge"]
        if n >= 5:
            modes.append("ring")
        mode = self.rng.choice(modes)
        self.rng.shuffle(ids)
        cut = {i: set() for i in ids}

        def sever(a, b):
            for x in a:
                for y in b:
                    if x != y:
                        cut[x].add(y)
                        cut[y].add(x)
        if mode == "isolate-leader":
            lid, known = self._leader_or_random()
            if not known:
                mode = "isolate-random"
            sever([lid], [i for i in ids if i != lid])
            groups = [[lid], [i for i in ids if i != lid]]
        elif mode == "halves":
            k = n // 2
            sever(ids[:k], ids[k:])
            groups = [ids[:k], ids[k:]]
        elif mode == "bridge":
            k = n // 2
            a, b, rest = ids[:k], ids[k], ids[k + 1:]
            sever(a, rest)
            groups = [a + [b], [b] + rest]
        else:  # ring: each node sees only its two neighbours
            for pos, i in enumerate(ids):
                near = {ids[(pos - 1) % n], ids[(pos + 1) % n], i}
                sever([i], [j for j in ids if j not in near])
            groups = [[ids[(p - 1) % n], ids[p], ids[(p + 1) % n]]
                      for p in range(n)]
        cut = {i: s for i, s in cut.items() if s}
        slot = {i: self._node(i).i for i in ids}  # namespaces are slots
        try:
            self.net.partition({slot[i]: {slot[j] for j in s}
                                for i, s in cut.items()})
        except Exception:
            self.net.heal()
            raise
        return self.net.heal, {
            "mode": mode, "targets": ["n%d" % i for i in sorted(cut)],
            "groups": [["n%d" % i for i in g] for g in groups]}

    def _clock(self):
        if C.faketime_lib() is None:
            raise NemesisError("libfaketime is not installed")
        mode = self.rng.choice(self.clock_modes)
        if mode == "jump":
            k = self.rng.randint(1, len(self._ids()))
            targets = self.rng.sample(self._ids(), k)
            offsets = {}
            for i in targets:
                n = self._node(i)
                if "LD_PRELOAD" not in proc_env(n.proc.pid):
                    raise NemesisError("n%d runs without libfaketime" % i)
                secs = self.rng.choice([-1, 1]) * self.rng.randint(
                    60, 86400 * 3)
                offsets["n%d" % i] = secs
                with open(n.clock_file, "w") as f:
                    f.write("%+ds\n" % secs)

            def undo():
                for i in targets:
                    with open(self._node(i).clock_file, "w") as f:
                        f.write("+0\n")
            return undo, {"mode": mode, "f": "clock-jump",
                          "targets": sorted(offsets),
                          "offsets_s": offsets}
        # rate: restart the leader, or every node (so that the leader
        # certainly runs at that rate), with a faster or slower monotonic
        # clock.
        rate = self.rng.choice(self.clock_rates)
        if self.rng.random() < 0.5:
            i, known = self._leader_or_random()
            targets = [i]
            mode = "rate-leader" if known else "rate-random-node"
        else:
            targets = self._ids()
            mode = "rate-all"
        nodes = [self._node(i) for i in targets]
        for n in nodes:
            n.kill()
        for n in nodes:
            n.rate = rate
            n.start()
        time.sleep(0.2)
        for n in nodes:
            env = proc_env(n.proc.pid)
            if not env.get("FAKETIME", "").endswith("x%g" % rate):
                raise NemesisError("n%d did not start with a clock rate"
                                   % n.i)
        # With every node drifting, also stop a holder for the rest of the
        # action (longer than a TTL): its lease then ends by the drifting
        # clocks, which is where a rate beyond rho shows.
        paused = []
        if mode == "rate-all":
            for _ in range(60):
                holders = self.c.holding_workers()
                if holders:
                    w = self.rng.choice(holders)
                    w.signal(signal.SIGSTOP)
                    w.paused = True
                    paused.append(w)
                    break
                time.sleep(0.1)

        def undo():
            for w in paused:
                w.signal(signal.SIGCONT)
                w.paused = False
            for n in nodes:
                n.kill()
            for n in nodes:
                n.rate = None
            self._restart(nodes)
        return undo, {"mode": mode, "f": "clock-rate",
                      "targets": ["n%d" % i for i in targets],
                      "rate": rate,
                      "paused": ["w%d" % w.wid for w in paused]}

    def _worker_kill(self):
        holders = self._holding_workers_soon()
        mode = "holding"
        if not holders:
            mode = "not-holding"
            holders = [w for w in self.c.workers
                       if w.running() and not w.paused and w.workload != "durable"]
        if not holders:
            raise NemesisError("no worker to kill")
        w = self.rng.choice(holders)
        at = mono_ns()  # it acts no more from here (checkers cap its lease)
        w.killed = True
        w.kill()
        if w.running():
            raise NemesisError("w%d survived SIGKILL" % w.wid)

        def undo():
            self.c.replace_worker(w)
        return undo, {"mode": mode, "targets": ["w%d" % w.wid], "at": at}

    def _revoke(self):
        holders = self._holding_workers_soon()
        if not holders:
            raise NemesisError("no worker holds a lock to revoke")
        w = self.rng.choice(holders)
        last = C.last_event(w.history) or {}
        lock, token = last.get("lock"), last.get("token")
        if not lock or not token:
            raise NemesisError("w%d's log names no grant" % w.wid)
        at = mono_ns()  # the revocation takes effect after this
        code, out = self.c.cli(C.ADMIN, ["revoke", lock, "--token",
                                         str(token)])
        if code not in (0, 3):  # 3: released meanwhile, nothing revoked
            raise NemesisError("raftlock revoke: %s" % out)
        return (lambda: None), {"targets": ["w%d" % w.wid], "lock": lock,
                                "token": token, "at": at,
                                "revoked": code == 0}

    def _restart_all(self):
        for n in self.c.nodes:
            n.kill()
        if any(n.running() for n in self.c.nodes):
            raise NemesisError("a node survived SIGKILL")

        def undo():
            self._restart(self.c.nodes)
        return undo, {"targets": ["n%d" % n.i for n in self.c.nodes]}

    def _membership(self):
        """Membership changes (docs/OPERATIONS.md), each verified through
        `raftlock member list`; see MEMBERSHIP_MODES."""
        mode = MEMBERSHIP_MODES[self.membership_turn % len(MEMBERSHIP_MODES)]
        self.membership_turn += 1
        if mode.startswith("grow") and not self.c.spares:
            mode = "replace"
        fields = {"mode": mode}
        if mode == "replace":
            victim = self.rng.choice(self.c.nodes)
            old, new = M.replace(self.c, victim)
            fields.update(targets=["n%d" % old], added=["n%d" % new])
            return (lambda: None), fields
        if mode == "remove-leader":
            lid, known = self._leader_or_random()
            node = self._node(lid)
            if not known:
                fields["mode"] = "remove-random"
            M.remove(self.c, node)

            def undo():
                M.add(self.c, node)
            fields.update(targets=["n%d" % lid])
            return undo, fields
        # grow: one member more for the hold, with another fault meanwhile
        companion_undo = None
        if mode == "grow+kill":
            lid = self.c.leader()
            victim = self.rng.choice([i for i in self._ids() if i != lid])
            self._node(victim).kill()
            fields["killed"] = ["n%d" % victim]

            def companion_undo():
                self._node(victim).start()
        elif mode == "grow+partition":
            lid, known = self._leader_or_random()
            others = [i for i in self._ids() if i != lid]
            slot = {i: self._node(i).i for i in self._ids()}
            self.net.partition({slot[lid]: {slot[i] for i in others},
                                **{slot[i]: {slot[lid]} for i in others}})
            fields["isolated"] = ["n%d" % lid]
            companion_undo = self.net.heal
        try:
            slot = self.c.spares[0]
            new = M.add(self.c, slot)
        finally:
            if companion_undo is not None:
                companion_undo()
        fields.update(targets=["n%d" % new])

        def undo():
            M.remove(self.c, self.c.node_by_id(new))
        return undo, fields

    ACTIONS = {"kill": _kill, "pause": _pause, "partition": _partition,
               "clock": _clock, "restart-all": _restart_all,
               "membership": _membership,
               "worker-kill": _worker_kill, "revoke": _revoke}

    # ------------------------------------------------------ interface --

    def start(self, name):
        """Acts; returns True when it did. Logs start (with `began`: when
        it began to act, which for a membership change or a clock rate is
        long before) or fail."""
        began = mono_ns()
        try:
            undo, fields = self.ACTIONS[name](self)
        except Exception as e:  # any failure to act fails the run
            # It may have acted in part (a node killed, a link cut): the
            # checkers take the cluster's state as unknown from `began`.
            self.log.event("fail", name, began=began, error=str(e))
            return False
        f = fields.pop("f", name)
        self.log.event("start", f, began=began, **fields)
        self.active = (f, undo, fields)
        return True

    def end(self):
        if self.active is None:
            return True
        f, undo, fields = self.active
        self.active = None
        began = mono_ns()
        try:
            undo()
        except Exception as e:
            self.log.event("fail", f, began=began, error="undo: %s" % e)
            return False
        self.log.event("end", f, began=began, targets=fields.get("targets"))
        return True

    def heal_all(self):
        """Undoes whatever is active and restores every node and worker:
        the state in which liveness is measured and the run ends."""
        ok = self.end()
        began = mono_ns()
        try:
            if self.net.partitioned:
                self.net.heal()
        except Exception as e:
            self.log.event("fail", "heal", began=began, error=str(e))
            ok = False
        for w in self.c.workers:
            if w.paused:
                w.signal(signal.SIGCONT)
                w.paused = False
        for n in self.c.nodes:
            if n.proc is not None and n.proc.paused:
                n.proc.signal(signal.SIGCONT)
                n.proc.paused = False
            if n.rate is not None:
                n.kill()
                n.rate = None
            if os.path.exists(n.clock_file):
                with open(n.clock_file, "w") as f:
                    f.write("+0\n")
        try:
            self._restart([n for n in self.c.nodes if not n.running()])
        except NemesisError as e:
            self.log.event("fail", "heal", began=began, error=str(e))
            ok = False
        return ok
