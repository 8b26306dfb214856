"""One harness run, or a suite of them (see jepsen/README.md)."""

import argparse
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

from . import bounds
from . import cluster as C
from . import floors
from . import netns
from . import nemesis as N

JEPSEN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(JEPSEN)
sys.path.insert(0, JEPSEN)
from checkers import __main__ as checkers  # noqa: E402
from checkers import history  # noqa: E402

SAFETY = ("fencing", "lease", "linearizable", "durability", "counter")
CHECKERS = SAFETY + ("liveness", "waits", "observe")

SUITES = {
    # 3 nodes, each nemesis alone: the CI suite (about 7 minutes).
    "ci": dict(nodes=3, time=35, runs=[
        ("kill", "mutex"), ("pause", "mutex"), ("partition", "mutex"),
        ("clock", "mutex"), ("restart-all", "mutex"),
        ("partition", "semaphore"), ("kill", "rwlock"),
        ("pause", "reentrant"), ("partition", "waiters"),
        ("membership", "mutex")]),
    # 5 nodes, 10 minutes per mix.
    "long": dict(nodes=5, time=600, runs=[
        ("partition,kill", "mutex"), ("pause,clock", "mutex"),
        ("restart-all,partition", "mutex"),
        ("kill,pause,partition,clock,restart-all", "mutex"),
        ("partition,pause,kill", "semaphore"),
        ("partition,kill,restart-all", "rwlock"),
        ("membership,kill,partition", "mutex"),
        ("partition,kill,pause", "pairs"),
        ("partition,pause,kill", "election"),
        # Crash-fast release: bound sessions, workers killed and paused.
        ("worker-kill,pause,kill", "mutex", {"bind_ms": 200}),
        # Revocation: token order and the register across revocations.
        ("revoke,kill", "mutex")]),
}


class Interrupted(Exception):
    pass


def _on_signal(sig, frame):
    raise Interrupted("signal %d" % sig)


def say(msg):
    print("[jepsen %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def find_binaries(build_dir):
    cands = {
        "raftlockd": ["server/raftlockd", "raftlockd", "bin/raftlockd"],
        "worker": ["bin/jepsen-worker", "jepsen/jepsen-worker"],
        "cli": ["bin/raftlock", "client/raftlock"],
    }
    found = {}
    for key, rels in cands.items():
        for r in rels:
            p = os.path.join(build_dir, r)
            if os.access(p, os.X_OK):
                found[key] = p
                break
    return found


def merge_history(run_dir, cl, nem_events):
    events = []
    paths = [w.history for w in cl.workers] + [
        os.path.join(run_dir, "register.jsonl")]
    for p in paths:
        try:
            with open(p) as f:
                for line in f:
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut by SIGKILL
        except OSError:
            pass
    events += [dict(e) for e in nem_events]
    events.sort(key=lambda e: e["time"])
    out = os.path.join(run_dir, "history.jsonl")
    with open(out, "w") as f:
        for e in events:
            f.write(json.dumps(e, sort_keys=True) + "\n")
    return out


class LockProgress:
    """Which locks the workers tried to acquire, and which were granted,
    at or after a time, and whether a read of the whole table was made
    then: read incrementally from the workers' histories."""

    def __init__(self, t_ns):
        self.t_ns = t_ns
        self.offsets = {}
        self.tried = set()
        self.granted = set()
        self.table_asked = set()  # processes with a read invoked since
        self.table_read = False

    def update(self, cl):
        for w in cl.workers:
            try:
                with open(w.history, "rb") as f:
                    f.seek(self.offsets.get(w.wid, 0))
                    data = f.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1  # keep a partial line for later
            self.offsets[w.wid] = self.offsets.get(w.wid, 0) + end
            for line in data[:end].splitlines():
                if b'"acquire"' not in line and b'"holders"' not in line:
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if ev["time"] < self.t_ns:
                    continue
                if ev.get("f") == "holders":
                    self.note_table_read(ev)
                elif ev.get("f") != "acquire":
                    continue
                elif ev.get("type") == "invoke":
                    self.tried.add(ev.get("lock"))
                elif ev.get("type") == "ok":
                    self.granted.add(ev.get("lock"))

    def note_table_read(self, ev):
        if ev.get("type") == "invoke":
            self.table_asked.add(ev.get("process"))
        elif ev.get("type") == "ok" and ev.get("process") in self.table_asked:
            self.table_read = True

    def every_lock_granted(self):
        """Some grant, and one on every lock tried since t_ns."""
        return bool(self.granted) and self.tried <= self.granted


def note_crashes(cl, nlog):
    """Logs every node that exited without the harness killing it."""
    for n in cl.slots:
        crash = n.check_crash()
        if crash:
            say("n%d exited on its own: %s" % (n.i, crash))
            nlog.event("info", "node-crash", **crash)


def plot(run_dir):
    """Plots with Debian's matplotlib; installs it once if missing."""
    script = os.path.join(JEPSEN, "harness", "plots.py")
    for py in ("/usr/bin/python3", sys.executable):
        if not os.access(py, os.X_OK):
            continue
        chk = subprocess.run([py, "-c", "import matplotlib"],
                             capture_output=True, timeout=60)
        if chk.returncode == 0:
            p = subprocess.run([py, script, run_dir], capture_output=True,
                               text=True, timeout=300)
            return p.returncode == 0, p.stderr[-500:]
    if shutil.which("apt-get") and os.geteuid() == 0 and \
            not os.environ.get("JEPSEN_NO_INSTALL"):
        subprocess.run(["apt-get", "install", "-y", "-qq",
                        "python3-matplotlib"], capture_output=True,
                       timeout=600,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        os.environ["JEPSEN_NO_INSTALL"] = "1"
        return plot(run_dir)
    return False, "matplotlib not available"


def plots_mode(args):
    """A suite plots only the runs that failed (2-3 s each, and what
    someone will look at); a single run plots always."""
    return args.plots or ("failed" if args.suite else "always")


def want_plots(args, valid):
    mode = plots_mode(args)
    return mode == "always" or (mode == "failed" and not valid)


def run_one(args, nemeses, workload, seed):
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    rng = random.Random(seed)
    run_id = "%04x" % random.Random(os.getpid() ^ time.time_ns()).getrandbits(16)
    run_dir = os.path.join(args.results, "%s-%s-%s" % (
        stamp, workload, "+".join(nemeses) or "none"))
    os.makedirs(run_dir, exist_ok=True)
    ttl = args.ttl_ms
    bound = args.liveness_bound_s or bounds.liveness_ms(
        ttl, args.election_timeout_ms) / 1000.0
    say("run %s: workload %s, nemesis %s, %d nodes, %ds, seed %d%s -> %s" % (
        run_id, workload, ",".join(nemeses) or "none", args.nodes,
        args.time, seed, security_note(args), run_dir))

    bins = find_binaries(args.build_dir)
    if args.worker_build_dir:
        # The client programs (worker; raftlock, for the grants) from the
        # normal build when --build-dir has none (a broken server's build).
        bins.update({k: v for k, v in
                     find_binaries(args.worker_build_dir).items()
                     if k in ("worker", "cli") and k not in bins})
    membership = "membership" in nemeses
    need = ["raftlockd", "worker"] + (
        ["cli"] if args.auth or membership or "revoke" in nemeses else [])
    if any(k not in bins for k in need):
        say("missing binaries in %s (need bin/raftlockd, bin/jepsen-worker%s)"
            ": %s" % (args.build_dir, " and bin/raftlock" if args.auth
                      else "", bins))
        return 2, None
    ok, why = netns.available()
    if not ok:
        say("network namespaces unavailable (%s): the nemesis cannot act; "
            "this run fails" % why)
        return 1, None

    netns.cleanup_stale(say)
    # Free slots (namespaces) for the members the membership nemesis adds.
    spares = 2 if membership else 0
    net = netns.Network(run_id, args.nodes + spares)
    cl = None
    nlog = N.Log(run_dir)
    nem = None
    status = 2
    meta = {"seed": seed, "nemesis": nemeses, "workload": workload,
            "nodes": args.nodes, "time_s": args.time, "ttl_ms": ttl, "bind_ms": args.bind_ms,
            "election_timeout_ms": args.election_timeout_ms,
            "workers": args.workers, "run_id": run_id,
            "build_dir": args.build_dir, "peer_tls": bool(args.peer_tls),
            "client_tls": "mutual" if args.client_tls else "off",
            "auth": "on" if args.auth else "off",
            "expect_violation": bool(args.expect_violation)}
    if args.auth:
        meta.update(auth_admin=C.ADMIN, worker_identity=C.WORKER,
                    worker_grant="lock,read on j%s/" % run_id)
    write_meta(run_dir, meta)
    hard_deadline = time.monotonic() + args.time + 240
    try:
        net.create()
        certs = None
        if args.peer_tls or args.client_tls:
            # A certificate per member id; membership uses new ids.
            certs = make_certs(
                run_dir, args.nodes + spares + (40 if membership else 0),
                [net.node_ip(i) for i in range(1, args.nodes + spares + 1)],
                [C.ADMIN, C.WORKER, C.OUTSIDER] if args.client_tls else [])
        cl = C.Cluster(net, run_dir, bins["raftlockd"], bins["worker"],
                       args.nodes, faketime="clock" in nemeses,
                       server_extra=["--election-timeout",
                                     str(args.election_timeout_ms)]
                       + args.server_arg,
                       peer_tls=certs if args.peer_tls else None,
                       client_tls=certs if args.client_tls else None,
                       auth=args.auth, cli=bins.get("cli"), spares=spares)
        cl.start_register()
        cl.start_nodes()
        if not cl.wait_ready(60):
            say("no ready leader within 60 s; see %s/nodes/*/raftlockd.log"
                % run_dir)
            return 2, None
        say("cluster ready, leader n%s" % cl.leader())
        prefix = "j%s/" % run_id
        if args.auth:
            checks = grant_and_probe(cl, prefix)
            meta["auth_checks"] = checks
            write_meta(run_dir, meta)
            bad = [c for c in checks if not c["ok"]]
            if bad:
                say("authentication checks failed: %s" % json.dumps(bad))
                return 1, None
            say("granted %s lock,read on %s; refusals as expected"
                % (C.WORKER, prefix))
        common = ["--ttl-ms", str(ttl), "--seed", str(seed),
                  "--prefix", prefix, "--request-timeout-ms",
                  str(bounds.WORKER_REQUEST_TIMEOUT_MS)]
        if args.bind_ms:
            common += ["--bind-ms", str(args.bind_ms)]
        for w in range(1, args.workers + 1):
            # Long enough holds for the revoke nemesis to find one.
            hold = "400" if "revoke" in nemeses else "60"
            extra = ["--locks", str(args.locks), "--hold-ms", hold]
            if workload == "semaphore":
                extra += ["--permits", str(args.permits)]
            cl.start_worker(w, workload, common + extra)
        cl.start_worker(args.workers + 1, "durable", common)

        nem = N.Nemesis(cl, net, rng, nlog, ttl)
        if args.clock_mode != "both":
            nem.clock_modes = [args.clock_mode]
        if args.clock_rates:
            nem.clock_rates = [float(x) for x in args.clock_rates.split(",")]
        end = time.monotonic() + args.time
        acted = 0
        failed = 0
        for _ in range(100000):
            now = time.monotonic()
            if now >= end or now >= hard_deadline:
                break
            time.sleep(min(rng.uniform(2.0, 5.0), max(0.0, end - now)))
            if not nemeses or time.monotonic() >= end:
                continue
            name = rng.choice(nemeses)
            if nem.start(name):
                acted += 1
                say("nemesis %s: %s" % (name, nlog.events[-1]))
                time.sleep(nem.hold_seconds(name))
                if not nem.end():
                    failed += 1
            else:
                failed += 1
                say("nemesis %s could not act: %s" % (
                    name, nlog.events[-1].get("error")))
            note_crashes(cl, nlog)
        note_crashes(cl, nlog)
        heal_ok = nem.heal_all()
        heal_t = N.mono_ns()
        nlog.event("end", "final-heal", targets=[])
        if nemeses and acted == 0:
            nlog.event("fail", "schedule", error="no nemesis acted")
        # The per-lock liveness checker needs each lock tried after the
        # heal to have had its chance: wait for a grant on every one (a
        # lock nobody can get keeps the run going up to the bound).
        say("healed; waiting up to %.0fs for a grant on every lock tried"
            % bound)
        wait_end = time.monotonic() + bound + 5
        progress = LockProgress(heal_t)
        while time.monotonic() < wait_end:
            progress.update(cl)
            if progress.every_lock_granted():
                break
            time.sleep(0.1)  # reads only what the workers added since
        # The durability checker wants the table read after the heal: the
        # durable worker reads it after each hold of 2-6 s.
        read_end = time.monotonic() + 10
        while not progress.table_read and time.monotonic() < read_end:
            time.sleep(0.2)
            progress.update(cl)
        if not progress.table_read:
            say("no read of the lock table after the heal")
        cl.stop_workers()
        if not heal_ok:
            failed += 1
        status = 0
    except Interrupted as e:
        say("interrupted (%s); tearing down" % e)
        status = 130
    except (netns.NetError, OSError) as e:
        say("harness error: %s" % e)
        status = 2
    finally:
        if cl is not None:
            cl.teardown()
        net.destroy()
        nlog.close()
    if status != 0:
        return status, None

    hist = merge_history(run_dir, cl, nlog.events)
    res = checkers.run(history.load(hist), ttl_ms=ttl,
                       liveness_bound_s=bound, rho=args.rho,
                       nodes=args.nodes)
    res["summary"].update(meta)
    crashes = [c for n in cl.slots for c in n.crashes]
    exits = cl.worker_exits()
    bad_exits = {w: rc for w, rc in exits.items() if rc != 0}
    res["summary"]["node_crashes"] = res["summary"]["node_crashes"] or crashes
    res["summary"]["worker_exits"] = exits
    if crashes or bad_exits:
        # A server or client that dies on its own is a bug, whatever the
        # history says.
        res["summary"]["valid"] = False
    res["summary"]["liveness_bound_s"] = bound
    # A run that checked nothing proves nothing: it fails.
    res["floors"] = floors.check(res, workload)
    if not res["floors"]["valid"]:
        res["summary"]["valid"] = False
    if args.auth or args.client_tls:
        res["auth"] = security_check(hist, meta)
        if not res["auth"]["valid"]:
            res["summary"]["valid"] = False
    if want_plots(args, res["summary"]["valid"]):
        plotted, why = plot(run_dir)
    else:
        plotted, why = False, "--plots %s" % plots_mode(args)
    res["summary"]["plots"] = ["latency.png", "throughput.png"] \
        if plotted else "not made: %s" % why
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        json.dump(res, f, indent=2, sort_keys=True, default=str)
    s = res["summary"]
    for name in CHECKERS:
        r = res[name]
        note = ""
        if name == "liveness":
            note = " max %ss after a heal (%d heals), %ss without a " \
                "grant in %ss judged (bound %ss)" % (
                    r["max_seconds"], r["heals"],
                    r["max_healthy_gap_seconds"],
                    r["healthy_seconds_judged"], r["bound_seconds"])
        if name == "waits":
            note = " max %ss past the timeout (bound %ss, %d waits)" % (
                r["max_over_seconds"], r["bound_seconds"], r["checked"])
        if name == "observe":
            note = " %d observations" % r["observations"]
        if name == "lease" and r["drift_overlap_count"]:
            note = " (%d overlaps under clock rate beyond rho, kept)" % \
                r["drift_overlap_count"]
        say("  %-12s %s%s" % (name, "PASS" if r["valid"] else
                              "FAIL (%d)" % r["violation_count"], note))
    if "auth" in res:
        r = res["auth"]
        say("  %-12s %s (refused to the workers: %s)" % (
            "auth", "PASS" if r["valid"] else "FAIL", json.dumps(
                r["worker_refusals"], sort_keys=True)))
    for why in res["floors"]["failures"]:
        say("  %-12s FAIL: %s" % ("floors", why))
    if crashes or bad_exits:
        say("  CRASHES: nodes %s, workers %s" % (crashes, bad_exits))
    say("  ops %d %s, nemesis actions %d, failures %d" % (
        s["ops"], json.dumps(s["op_counts"], sort_keys=True),
        s["nemesis_actions"], len(s["nemesis_failures"])))
    if args.expect_violation:
        return expected_verdict(args, res), res
    say("verdict %s" % ("PASS" if s["valid"] else "FAIL"))
    return (0 if s["valid"] else 1), res


def _caught_by(res, name):
    """Whether checker `name` found a violation; for liveness, one of its
    per-lock rule, the rule a broken server's lock held by nobody known
    must trip: its other rules fail on any stall, which proves nothing of
    that one."""
    if res[name]["valid"]:
        return False
    if name != "liveness":
        return True
    return res[name].get("per_lock_violations", 0) > 0


def expected_verdict(args, res):
    """A broken server's run passes when a checker caught it and, with
    --expect-caught, when each named checker did: a checker that stops
    seeing the violation it is there for must fail the test, even if
    another one still sees something."""
    # A server that breaks de-duplication leaves locks held by nobody
    # the clients know: per-lock liveness is one of its witnesses.
    watch = SAFETY + (("liveness",) if args.broken_kind == "dedup" else ())
    caught = [n for n in CHECKERS if not res[n]["valid"]]
    missed = [n for n in args.expect_caught if not _caught_by(res, n)]
    if res["summary"]["nemesis_failures"]:
        say("a nemesis could not act: the run proves nothing")
        return 1
    if missed:
        say("EXPECTED A VIOLATION from %s, not found (caught by: %s)" % (
            ", ".join(missed), ", ".join(caught) or "none"))
        return 1
    if not any(n in watch for n in caught):
        say("EXPECTED A VIOLATION, found none")
        return 1
    say("expected violation caught by: %s" % ", ".join(caught))
    return 0


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="jepsen/run",
        description="Fault-injection run against a real raftlock cluster.")
    ap.add_argument("--nemesis", default="partition,kill",
                    help="comma list of %s, 'all' or 'none'" % ",".join(N.ALL))
    ap.add_argument("--workload", default="mutex",
                    choices=["mutex", "semaphore", "rwlock", "reentrant",
                             "waiters", "pairs", "election"])
    ap.add_argument("--time", type=int, default=60,
                    help="seconds of faults (setup and recovery come on top)")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--nodes", type=int, default=3, choices=[3, 5])
    ap.add_argument("--workers", type=int, default=5)
    ap.add_argument("--locks", type=int, default=3)
    ap.add_argument("--permits", type=int, default=2)
    ap.add_argument("--ttl-ms", type=int, default=3000)
    ap.add_argument("--bind-ms", type=int, default=0,
                    help="crash-fast release: the workers' sessions are bound "
                    "to their connection with this grace (0: not bound)")
    ap.add_argument("--rho", type=float, default=0.01,
                    help="clock-rate difference the leases tolerate")
    ap.add_argument("--liveness-bound-s", type=float,
                    help="default: 4 election timeouts + the workers' "
                    "request timeout + a connect timeout + 1 TTL "
                    "(harness/bounds.py)")
    ap.add_argument("--election-timeout-ms", type=int,
                    default=bounds.ELECTION_TIMEOUT_MS,
                    help="raftlockd --election-timeout on every node")
    ap.add_argument("--clock-mode", choices=["jump", "rate", "both"],
                    default="both", help="what the clock nemesis does")
    ap.add_argument("--clock-rates",
                    help="comma list of monotonic clock rates to pick from "
                    "(default 0.5,0.9,0.995,1.005,1.1,2.0)")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--results", default=os.path.join(JEPSEN, "results"))
    ap.add_argument("--worker-build-dir",
                    help="where to find jepsen-worker when --build-dir has "
                    "none (default: the normal build)")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra raftlockd argument (repeatable)")
    ap.add_argument("--peer-tls", action="store_true",
                    help="mutual TLS between the nodes on the raft port "
                    "(certificates from deploy/make-certs in RUN/certs)")
    ap.add_argument("--client-tls", action="store_true",
                    help="client-tls = mutual on the nodes; the workers, the "
                    "harness's STATUS probe and the raftlock command "
                    "present client certificates from RUN/certs")
    ap.add_argument("--auth", action="store_true",
                    help="auth = on with identities from client "
                    "certificates (implies --client-tls): %s grants %s "
                    "lock,read on the run's prefix before the workload; "
                    "%s, with no rules, must be refused" % (
                        C.ADMIN, C.WORKER, C.OUTSIDER))
    ap.add_argument("--secure", action="store_true",
                    help="everything on: --peer-tls --client-tls --auth")
    ap.add_argument("--expect-violation", action="store_true",
                    help="succeed only if a safety checker fails")
    ap.add_argument("--broken-build", metavar="DIR",
                    help="a build with -DRAFTLOCK_BROKEN_FENCING=ON (or "
                    "_DEDUP=ON, with --broken-kind dedup): same as "
                    "--build-dir DIR --expect-violation")
    ap.add_argument("--build-broken", metavar="DIR",
                    help="configure and build raftlockd with "
                    "-DRAFTLOCK_BROKEN_<KIND>=ON in DIR, then as "
                    "--broken-build DIR")
    ap.add_argument("--broken-kind", choices=["fencing", "dedup"],
                    default="fencing",
                    help="what the broken build breaks: fencing (grants "
                    "ignore holders, one token for all) or dedup (a retried "
                    "command executes again)")
    ap.add_argument("--expect-caught", metavar="CHECKERS", default="",
                    help="with a broken build: comma list of checkers that "
                    "must each find a violation (e.g. fencing,lease)")
    ap.add_argument("--suite", choices=sorted(SUITES))
    ap.add_argument("--plots", choices=["always", "failed", "never"],
                    help="latency and throughput plots for every run, "
                    "failed runs only, or none (default: always for one "
                    "run, failed for a suite)")
    args = ap.parse_args(argv)
    args.expect_caught = [c for c in args.expect_caught.split(",") if c]
    unknown = [c for c in args.expect_caught if c not in CHECKERS]
    if unknown:
        ap.error("--expect-caught: no checker %s" % ",".join(unknown))
    if args.secure:
        args.peer_tls = args.client_tls = args.auth = True
    if args.auth:
        args.client_tls = True
    if args.build_broken:
        build_broken(os.path.abspath(args.build_broken), args.broken_kind)
        args.broken_build = args.build_broken
    if args.broken_build:
        args.worker_build_dir = args.worker_build_dir or args.build_dir
        args.build_dir = args.broken_build
        args.expect_violation = True
    if args.expect_caught and not args.expect_violation:
        ap.error("--expect-caught goes with a broken server (--build-broken, "
                 "--broken-build or --expect-violation)")
    args.build_dir = os.path.abspath(args.build_dir)
    if args.worker_build_dir:
        args.worker_build_dir = os.path.abspath(args.worker_build_dir)
    args.results = os.path.abspath(args.results)
    return args


def build_broken(build_dir, kind):
    """A test-only server that deliberately breaks safety."""
    say("building the broken (%s) server in %s" % (kind, build_dir))
    for cmd, limit in (
            (["cmake", "-S", REPO, "-B", build_dir,
              "-DRAFTLOCK_BROKEN_%s=ON" % kind.upper(),
              "-DRAFTLOCK_TESTS=OFF"], 300),
            (["make", "-C", build_dir, "-j2", "raftlockd"], 1200)):
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=limit)
        if p.returncode != 0:
            raise SystemExit("%s failed:\n%s" % (
                " ".join(cmd), (p.stdout + p.stderr)[-3000:]))


def security_note(args):
    on = [name for name, flag in (("peer TLS", args.peer_tls),
                                  ("client mutual TLS", args.client_tls),
                                  ("auth", args.auth)) if flag]
    return ", " + " + ".join(on) if on else ""


def write_meta(run_dir, meta):
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump(meta, f, indent=2)


def grant_and_probe(cl, prefix, timeout=60):
    """With auth on: the admin grants the workers' identity lock,read on
    the run's prefix, then the rules are shown to hold where they should
    and refuse where they should (`raftlock check NAME 1`: exit 3, "not
    current", when reading is allowed; exit 1 with EPERM's message when
    not). Each step is retried until its answer is conclusive (a new
    leader may still be settling). Returns one dict per step with "ok"."""
    steps = [
        ("grant", C.ADMIN, ["acl", "set", C.WORKER, prefix, "lock,read"], 0),
        ("worker reads its prefix", C.WORKER,
         ["check", prefix + "probe", "1"], 3),
        ("worker refused beyond its prefix", C.WORKER,
         ["check", "outside-" + prefix + "probe", "1"], "EPERM"),
        ("identity without rules refused", C.OUTSIDER,
         ["check", prefix + "probe", "1"], "EPERM"),
        ("the rule is listed", C.ADMIN, ["acl", "list"],
         "%s	%s	lock,read" % (C.WORKER, prefix)),
    ]
    out = []
    deadline = time.monotonic() + timeout
    for name, who, argv, want in steps:
        while True:
            rc, text = cl.cli(who, argv)
            if want == "EPERM":
                ok = rc == 1 and "permission denied" in text
            elif isinstance(want, str):
                ok = rc == 0 and want in text.splitlines()
            else:
                ok = rc == want
            if ok or time.monotonic() >= deadline:
                break
            time.sleep(1)
        out.append({"step": name, "identity": who,
                    "command": "raftlock " + " ".join(argv),
                    "exit": rc, "output": text[-300:], "ok": ok})
    return out


def security_check(hist, meta):
    """The workers' identity holds lock,read on every name it uses: no
    request of theirs may be refused for permission (EPERM); TLS refusals
    (ETLS: a handshake cut by a node killed in its middle) are counted."""
    refusals = {}
    with open(hist) as f:
        for line in f:
            ev = json.loads(line)
            if isinstance(ev.get("process"), int) and \
                    ev.get("error") in ("EPERM", "ETLS"):
                key = "%s %s" % (ev.get("f"), ev["error"])
                refusals[key] = refusals.get(key, 0) + 1
    eperm = sum(n for k, n in refusals.items() if k.endswith("EPERM"))
    checks = meta.get("auth_checks", [])
    return {"valid": eperm == 0 and all(c["ok"] for c in checks),
            "worker_refusals": refusals, "checks": checks}


def make_certs(run_dir, nodes, hosts, clients):
    """The CA, node and client certificates for --peer-tls and
    --client-tls, in RUN/certs. A node's certificate serves both ports and
    names every node's address (the client port's certificate is checked
    against the address dialled, by the workers and by a leader asking its
    followers for their status). They are dated four days back: the clock
    nemesis moves a node's wall clock up to three days either way, and a
    certificate that is not yet valid on a node's clock would cut that node
    off (a partition it did not ask for)."""
    d = os.path.join(run_dir, "certs")
    cmd = [os.path.join(REPO, "deploy", "make-certs"), d, "--nodes",
           str(nodes), "--hosts", ",".join(hosts)]
    for c in clients:
        cmd += ["--client", c]
    env = dict(os.environ)
    lib = C.faketime_lib()
    if lib is not None:
        # libfaketime itself (the faketime wrapper's named semaphores
        # collide between programs that use it at once).
        env.update(LD_PRELOAD=lib, FAKETIME="-4d")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       env=env)
    if p.returncode != 0:
        raise SystemExit("make-certs failed:\n%s" % (p.stdout + p.stderr))
    return d


def nemesis_list(text):
    if text in ("", "none"):
        return []
    if text == "all":
        return list(N.ALL)
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in N.ALL + N.EXTRA]
    if bad:
        raise SystemExit("unknown nemesis: %s (have %s)" % (
            ",".join(bad), ",".join(N.ALL + N.EXTRA)))
    return names


def main(argv=None):
    args = parse(argv)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    seed = args.seed if args.seed is not None else \
        random.SystemRandom().randrange(1, 2 ** 31)
    print("seed %d" % seed, flush=True)
    if not args.suite:
        code, _ = run_one(args, nemesis_list(args.nemesis), args.workload,
                          seed)
        return code
    suite = SUITES[args.suite]
    args.nodes = suite["nodes"] if args.nodes == 3 and args.suite == "long" \
        else args.nodes
    if args.time == 60:
        args.time = suite["time"]
    rows = []
    worst = 0
    bind_ms = args.bind_ms
    for k, (nems, workload, *opts) in enumerate(suite["runs"]):
        args.bind_ms = opts[0].get("bind_ms", bind_ms) if opts else bind_ms
        code, res = run_one(args, nemesis_list(nems), workload, seed + k)
        rows.append((nems, workload, code, res))
        worst = max(worst, code)
        if code == 130:
            break
    say("suite %s (seed %d):" % (args.suite, seed))
    passed = sum(1 for r in rows if r[2] == 0)
    for nems, workload, code, res in rows:
        s = res["summary"] if res else {}
        say("  %-40s %-9s %s ops=%s actions=%s" % (
            nems, workload, "PASS" if code == 0 else "FAIL(%d)" % code,
            s.get("ops"), s.get("nemesis_actions")))
    print("%d passed, %d failed" % (passed, len(rows) - passed), flush=True)
    return 0 if worst == 0 else 1
