#!/usr/bin/env python3
"""Turns a tests/bench/run result directory into results.json, results.md
and PNG plots (through gnuplot, when it is installed).

usage: report.py RESULT_DIR [--publish BENCH_DIR | --tls-summary CLIENTS]
Reads RESULT_DIR/limits.json, RESULT_DIR/results.jsonl and RESULT_DIR/cdf/.
--publish also writes BENCH_DIR/RESULTS.md and copies the plots to
BENCH_DIR/plots/, so that the table kept in the repository shows them.
--tls-summary prints one line: the TLS point at CLIENTS so far.
"""
import datetime
import json
import os
import shutil
import subprocess
import sys

SYSTEMS = ["raftlock", "raftlock-threads", "raftlock-tls", "etcd", "redis"]
# One colour per system in every plot.
COLORS = {"raftlock": "#1f77b4", "raftlock-threads": "#17becf", "raftlock-tls": "#9467bd",
          "etcd": "#d62728", "redis": "#2ca02c"}
LOCK_ORDER = ["uncontended", "contended", "rwlock", "semaphore"]
# What a peer does not have, said in the table instead of a number.
PEER_LACKS = {
    "etcd": {
        "rwlock": "N/A: etcd's concurrency package has no read-write lock",
        "semaphore": "N/A: etcd's concurrency package has no semaphore",
    },
    "redis": {
        "rwlock": "N/A: no read-write lock in the SET NX recipe",
        "semaphore": "N/A: no semaphore in the SET NX recipe",
    },
}


def load(path):
    runs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    runs.append(json.loads(line))
                except ValueError:
                    pass
    return runs


def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float) and v >= 1000:
        return "{:,.0f}".format(v)
    return ("{:." + str(digits) + "f}").format(v)


def ratio(a, b):
    if not a or not b:
        return "-"
    return "{:.1f}x".format(a / b)


def ok(r):
    return r is not None and r.get("status") == "ok"


def find(runs, system, workload, clients):
    for r in runs:
        if (r.get("system") == system and r.get("workload") == workload
                and r.get("clients") == clients):
            return r
    return None


def lock_table(runs):
    points = sorted({(r["workload"], r["clients"]) for r in runs
                     if r.get("workload") in LOCK_ORDER},
                    key=lambda p: (LOCK_ORDER.index(p[0]), p[1]))
    out = ["| system | workload | clients | pairs/s | p50 ms | p99 ms | max ms "
           "| server CPU s / 1k pairs | generator CPU s / 1k | errors | raftlock/etcd "
           "| raftlock/redis |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for wl, n in points:
        rl = find(runs, "raftlock", wl, n)
        rt = find(runs, "raftlock-threads", wl, n)
        et = find(runs, "etcd", wl, n)
        rd = find(runs, "redis", wl, n)
        for sysname, r in (("raftlock", rl), ("raftlock-threads", rt), ("etcd", et),
                           ("redis", rd)):
            if r is None and sysname == "raftlock-threads":
                continue
            if r is None:
                lack = PEER_LACKS.get(sysname, {}).get(wl)
                if lack:
                    out.append("| {} | {} | {} | {} | | | | | | | | |".format(
                        sysname, wl, n, lack))
                continue
            if not ok(r):
                out.append("| {} | {} | {} | {}: {} | | | | | | | | |".format(
                    sysname, wl, n, r.get("status"),
                    r.get("detail", "").replace("|", "/")))
                continue
            re_, rr = "", ""
            if sysname.startswith("raftlock"):
                re_ = ratio(r["pairs_per_s"], et["pairs_per_s"]) if ok(et) else "-"
                rr = ratio(r["pairs_per_s"], rd["pairs_per_s"]) if ok(rd) else "-"
            out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                sysname, wl, n, fmt(r["pairs_per_s"]), fmt(r["p50_ms"], 2),
                fmt(r["p99_ms"], 2), fmt(r["max_ms"], 1),
                fmt(r["server_cpu_s_per_1k"], 3), fmt(r.get("client_cpu_s_per_1k"), 3),
                r["errors"], re_, rr))
    return out


def scale_tables(runs):
    out = []
    ses = [r for r in runs if r.get("workload") == "sessions"]
    if ses:
        out += ["", "### Idle sessions kept alive (raftlock; TTL 10 s)", "",
                "| sessions | open s | keepalives/s | keepalive p50 ms | p99 ms "
                "| leader CPU (cores) | cluster CPU (cores) | leader RSS MiB "
                "| lost | status |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in ses:
            out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                r.get("sessions_open", r.get("clients")), fmt(r.get("open_s")),
                fmt(r.get("pairs_per_s")), fmt(r.get("p50_ms"), 1),
                fmt(r.get("p99_ms"), 1), fmt(r.get("leader_cpu_cores"), 3),
                fmt(r.get("cluster_cpu_cores"), 3), fmt(r.get("leader_rss_mib")),
                r.get("lost", "-"), r.get("status", "")
                + (": " + r["detail"] if r.get("detail") else "")))
        out.append("")
        out.append("etcd (leases with KeepAlive) and Redis (per-key TTL) were not "
                   "driven in this workload.")
    st = [r for r in runs if r.get("workload") == "state"]
    if st:
        def secs(v):
            if v is None or v == -2:
                return "not run"
            return "failed" if v < 0 else fmt(v, 2)
        out += ["", "### Held locks (raftlock)", "",
                "| locks held | fill s | fill locks/s | server RSS MiB (max node) "
                "| LMDB MiB (all nodes) | catch-up of a new member s "
                "| cold restart s (trusted LMDB): ready leader / first read "
                "| restart rebuilding LMDB s: ready leader / first read | status |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in st:
            out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                r.get("locks_held", "-"), fmt(r.get("fill_s")),
                fmt(r.get("pairs_per_s")), fmt(r.get("server_rss_mib")),
                fmt(r.get("lmdb_mib")), secs(r.get("catchup_s")),
                secs(r.get("restart_leader_s")) + " / " + secs(r.get("restart_s")),
                secs(r.get("rebuild_leader_s")) + " / " + secs(r.get("rebuild_s")),
                r.get("status", "") + (": " + r["detail"] if r.get("detail") else "")))
    for r in runs:
        if r.get("workload") == "snapshot" and r.get("snapshots"):
            off = r.get("snapshots_off_loop", 0)
            packed = r.get("snapshots_packed", 0)
            if off:
                how = ("{} of them with the image dumped off the loop{}; the largest, {} MiB{}, "
                       "was dumped in {} ms; the longest dump on the loop (a stall): {} ms"
                       .format(off, " ({} packed)".format(packed) if packed else "",
                               r.get("largest_snapshot_mib"),
                               " (a state of {} MiB)".format(r.get("largest_snapshot_state_mib"))
                               if packed else "",
                               r.get("largest_snapshot_ms"), r.get("longest_loop_stall_ms", 0)))
            else:
                how = ("the largest, {} MiB, was serialized in {} ms (the node's loop "
                       "stalls that long)".format(r.get("largest_snapshot_mib"),
                                                  r.get("largest_snapshot_ms")))
            out += ["", "Snapshots during the run: {} taken; {}; longest restore {} ms "
                    "({} MiB).".format(r["snapshots"], how, r.get("longest_restore_ms", "-"),
                                       r.get("longest_restore_mib", "-"))]
    return out


def targets(runs):
    """The issue's targets, each with the measured figure."""
    rows = []

    def add(name, measured, met):
        rows.append("| {} | {} | {} |".format(
            name, measured, "-" if met is None else ("met" if met else "NOT met")))

    def pair(wl, n):
        return find(runs, "raftlock", wl, n), find(runs, "etcd", wl, n)

    rl, et = pair("uncontended", 64)
    if ok(rl) and ok(et):
        x = rl["pairs_per_s"] / et["pairs_per_s"] if et["pairs_per_s"] else 0
        add("uncontended 64: >= 10x etcd pairs/s", "{:.1f}x".format(x), x >= 10)
        add("uncontended 64: p99 below etcd's", "{:.2f} vs {:.2f} ms".format(
            rl["p99_ms"], et["p99_ms"]), rl["p99_ms"] < et["p99_ms"])
    if ok(rl) and rl.get("commands_per_entry") is not None:
        add("uncontended 64: client commands sharing one log entry (report)",
            "{:.2f} commands per entry, {:,.0f} entries/s".format(
                rl["commands_per_entry"], rl.get("raft_entries_per_s", 0)), None)
    rl, et = pair("uncontended", 1)
    if ok(rl) and ok(et):
        x = rl["pairs_per_s"] / et["pairs_per_s"] if et["pairs_per_s"] else 0
        add("uncontended 1: >= 3x etcd pairs/s", "{:.1f}x".format(x), x >= 3)
    rl, et = pair("contended", 16)
    if ok(rl) and rl["pairs_per_s"] > 0:
        # With a queue always full, one grant follows another: the mean
        # hand-over is the window divided by the grants.
        h = 1000.0 / rl["pairs_per_s"]
        add("contended 16: hand-over about one commit plus one round trip (~1 ms)",
            "{:.2f} ms per hand-over (etcd {}); acquire p50 {:.2f} ms with 15 ahead".format(
                h, "{:.1f} ms".format(1000.0 / et["pairs_per_s"]) if ok(et) and et["pairs_per_s"]
                else "-", rl["p50_ms"]), h <= 1.2)
        if ok(et):
            x = rl["pairs_per_s"] / et["pairs_per_s"] if et["pairs_per_s"] else 0
            add("contended 16: >= 10x etcd pairs/s", "{:.1f}x".format(x), x >= 10)
    for r in runs:
        if r.get("workload") == "sessions" and ok(r) and r.get("clients", 0) == 100000:
            c = r.get("leader_cpu_cores", -1)
            add("100,000 sessions: leader below one core", "{:.2f} cores".format(c),
                0 <= c < 1)
        if r.get("workload") == "state" and r.get("restart_s") not in (None, -2):
            v = r["restart_s"]
            add("{:,} locks: cold restart < 10 s".format(r.get("locks_held", 0)),
                "failed" if v < 0 else "{:.2f} s".format(v), 0 <= v < 10)
    if not rows:
        return []
    return ["", "### Targets (issue 4)", "", "| target | measured | |", "|---|---|---|"] + rows


def median(values):
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2.0


def alternated(runs, n, first, second, workload="uncontended"):
    """A point of workload measured in rounds at n clients, each round a
    window of each system, back to back: the rounds of each
    side, their medians, and the medians of the rounds' pairs/s ratios
    (second / first) and p50 differences, which targets are judged by (a
    round compares two windows next to each other, so the machine's drift
    over a run falls on both); None when no round has both windows."""
    def rounds(system):
        return [r for r in runs if r.get("system") == system
                and r.get("workload") == workload and r.get("clients") == n]
    # Rounds pair by their order, failed windows included, so that one
    # failure does not pair the windows after it across rounds.
    pairs = [(a, b) for a, b in zip(rounds(first), rounds(second))
             if ok(a) and ok(b) and a["pairs_per_s"]]
    if not pairs:
        return None
    p, t = [a for a, _ in pairs], [b for _, b in pairs]
    m = {k: (median([r[k] for r in p]), median([r[k] for r in t]))
         for k in ("pairs_per_s", "p50_ms", "p99_ms", "server_cpu_s_per_1k")}
    return {"first": p, "second": t, "median": m,
            "ratio": median([b["pairs_per_s"] / a["pairs_per_s"] for a, b in pairs]),
            "p50_diff": median([b["p50_ms"] - a["p50_ms"] for a, b in pairs])}


def rounds_text(pt):
    """The ratios of an alternated point's rounds, in order."""
    return ", ".join("{:.2f}x".format(b["pairs_per_s"] / a["pairs_per_s"])
                     for a, b in zip(pt["first"], pt["second"]) if a["pairs_per_s"])


def against_redis(runs, wl, n):
    """raftlock/Redis at a point, judged by the median of the rounds'
    ratios when the run has rounds of the two (a raftlock window then a
    Redis one, back to back), else by the main table's rows: (ratio, how,
    (raftlock p99, Redis p99)), or None."""
    pt = alternated(runs, n, "redis-round", "raftlock-round", wl)
    if pt is not None:
        p99 = pt["median"]["p99_ms"]
        return (pt["ratio"], " (median of the rounds: {})".format(rounds_text(pt)),
                (p99[1], p99[0]))
    rl, rd = find(runs, "raftlock", wl, n), find(runs, "redis", wl, n)
    if not ok(rl) or not ok(rd) or not rd["pairs_per_s"]:
        return None
    return (rl["pairs_per_s"] / rd["pairs_per_s"], " (one window each)",
            (rl["p99_ms"], rd["p99_ms"]))


def tls_point(runs, n):
    """The TLS point at n clients: the plaintext and TLS clusters, alternated."""
    return alternated(runs, n, "raftlock-plain", "raftlock-tls")


def tls_summary(runs, n):
    pt = tls_point(runs, n)
    if pt is None:
        return "[bench] TLS point at {} clients: no successful round on one side".format(n)
    rounds = ", ".join("{:.2f}x/{:+.3f} ms".format(t["pairs_per_s"] / p["pairs_per_s"],
                                                  t["p50_ms"] - p["p50_ms"])
                       for p, t in zip(pt["first"], pt["second"]) if p["pairs_per_s"])
    return ("[bench] TLS/plaintext at {} clients (medians of {} rounds): pairs/s {:.2f}x, "
            "p50 {:+.3f} ms; rounds (pairs/s ratio/p50 difference): {}".format(
                n, min(len(pt["first"]), len(pt["second"])), pt["ratio"], pt["p50_diff"], rounds))


def tls_cost(runs):
    """The TLS point against the plaintext cluster in the same run, and
    issue 11's targets."""
    rows, goals = [], []
    for n in sorted({r["clients"] for r in runs if r.get("system") == "raftlock-tls"}):
        pt = tls_point(runs, n)
        if pt is None:
            rows.append("| {} | a side failed: see results.jsonl | | | | | | |".format(n))
            continue
        m = pt["median"]
        each = "; ".join("{:.2f}x, {:+.3f}".format(t["pairs_per_s"] / p["pairs_per_s"],
                                                 t["p50_ms"] - p["p50_ms"])
                         for p, t in zip(pt["first"], pt["second"]) if p["pairs_per_s"])
        rows.append("| {} | {} / {} | {:.2f}x | {:.3f} / {:.3f} | {:+.3f} | {:.2f} / {:.2f} "
                    "| {} / {} | {} |".format(
                        n, fmt(m["pairs_per_s"][0]), fmt(m["pairs_per_s"][1]), pt["ratio"],
                        m["p50_ms"][0], m["p50_ms"][1], pt["p50_diff"], m["p99_ms"][0],
                        m["p99_ms"][1], fmt(m["server_cpu_s_per_1k"][0], 3),
                        fmt(m["server_cpu_s_per_1k"][1], 3), each))
        if n == 64:
            goals.append("| 64 clients: TLS pairs/s at least 0.85x plaintext | {:.2f}x | {} |".format(
                pt["ratio"], "met" if pt["ratio"] >= 0.85 else "NOT met"))
        if n == 1:
            goals.append("| 1 client: TLS acquire p50 at most 0.05 ms above plaintext | "
                         "{:+.3f} ms | {} |".format(pt["p50_diff"],
                                                    "met" if pt["p50_diff"] <= 0.05 else "NOT met"))
    if not rows:
        return []
    return section(
        "### TLS cost (issue 11)",
        "The uncontended workload alternately on the plaintext cluster and on a second "
        "3-node cluster with mutual TLS on both ports (peer TLS between members, "
        "`client-tls = mutual`, the client presenting its own certificate). Each round "
        "runs one window on each cluster, back to back; the ratio and the p50 difference "
        "are the medians of the rounds' (the targets are judged by them), the other "
        "figures the medians of each side.",
        "| clients | pairs/s plaintext / TLS | TLS/plaintext | p50 ms plaintext / TLS "
        "| p50 difference ms | p99 ms plaintext / TLS | server CPU s / 1k pairs "
        "plaintext / TLS | rounds: ratio, p50 difference ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---|", rows, goals)


def section(title, intro, head, rule, rows, goals):
    """A report section: its table, then its targets if any."""
    out = ["", title, "", intro, "", head, rule] + rows
    if goals:
        out += ["", "| target | measured | |", "|---|---|---|"] + goals
    return out


def blocking_calls(runs):
    """Issue 15, first row: the blocking calls with a thread per client
    against the asynchronous API, in the same run."""
    rows, goals = [], []
    for n in sorted({r["clients"] for r in runs if r.get("system") == "raftlock-threads"}):
        a = find(runs, "raftlock", "uncontended", n)
        b = find(runs, "raftlock-threads", "uncontended", n)
        if not ok(a) or not ok(b) or not a["pairs_per_s"]:
            continue
        q = b["pairs_per_s"] / a["pairs_per_s"]
        rows.append("| {} | {} / {} | {:.2f}x | {} / {} | {} / {} | {} / {} |".format(
            n, fmt(b["pairs_per_s"]), fmt(a["pairs_per_s"]), q,
            fmt(b.get("client_cpu_s_per_1k"), 3), fmt(a.get("client_cpu_s_per_1k"), 3),
            fmt(b.get("client_switches_per_pair"), 2), fmt(a.get("client_switches_per_pair"), 2),
            fmt(b["server_cpu_s_per_1k"], 3), fmt(a["server_cpu_s_per_1k"], 3)))
        if n not in (16, 64):
            continue
        # the target is judged by the alternated rounds, when the run has them
        pt = alternated(runs, n, "raftlock-pair-async", "raftlock-pair-threads")
        if pt is not None:
            q, how = pt["ratio"], " (median of the rounds: {})".format(rounds_text(pt))
        else:
            how = " (one window each)"
        goals.append("| {} clients: blocking calls >= 0.9x the asynchronous API | {:.2f}x{} "
                     "| {} |".format(n, q, how, "met" if q >= 0.9 else "NOT met"))
    if not rows:
        return []
    return section(
        "### Blocking calls (issue 15)",
        "The uncontended workload with a thread per client and the blocking calls "
        "(raftlock-threads) against the asynchronous API (raftlock), one client object. "
        "Context switches are the generator's own (getrusage), per pair. The table "
        "compares the rows of the main table, measured a minute or more apart; at 16 and "
        "64 clients the targets are judged by rounds of the two, each round a window of "
        "the asynchronous API then one of the blocking calls, back to back, on the same "
        "cluster (the median of the rounds' ratios).",
        "| clients | pairs/s threads / async | threads/async | generator CPU s / 1k "
        "threads / async | context switches / pair threads / async | server CPU s / 1k "
        "threads / async |",
        "|---:|---:|---:|---:|---:|---:|", rows, goals)


def notes(d, runs):
    """Plain statements about things in this run a reader should not miss."""
    out = []
    for r in runs:
        if r.get("workload") == "sessions" and r.get("lost"):
            out.append("- {:,} of {:,} idle sessions were lost (their keepalives were not "
                       "acknowledged within the lease) while {:,} sessions were held; "
                       "opening them took {} s.".format(
                           r["lost"], r.get("sessions_open", 0), r.get("clients", 0),
                           r.get("open_s")))
        if r.get("workload") == "state" and r.get("catchup_s") == -1:
            first = r.get("catchup_first_s")
            out.append("- The replaced member (node 3, data directory deleted, restarted "
                       "empty) had not applied what the cluster had committed within 60 s{}.".format(
                           "" if first is None else
                           "; it never applied past its bootstrap entry" if first < 0 else
                           "; it first applied past its bootstrap entry (by snapshot or log) "
                           "after {:.2f} s, then stopped short".format(first)))
    elections = []
    logs = os.path.join(d, "logs")
    if os.path.isdir(logs):
        for name in sorted(os.listdir(logs)):
            if name.startswith("rl-n") and name.endswith(".log"):
                with open(os.path.join(logs, name), errors="replace") as f:
                    elections += [line.split()[0] for line in f if "elected leader" in line]
    if elections:
        out.append("- raftlock leader elections during the run: {} (expected: one at start; "
                   "with the state workload, up to two around the member it wipes and up to "
                   "two at each of its 2 whole-cluster restarts, a hand-over at shutdown and "
                   "an election at start); at {}.".format(
                       len(elections), ", ".join(sorted(elections))))
    return (["", "### Notes", ""] + out) if out else []


def machine_line(limits):
    if not limits:
        return []
    log = ""
    if "log_write_p50_ms" in limits:
        log = ("; durable 4 KiB write into a preallocated file (as a raft segment's): "
               "{:,.0f}/s (p50 {:.2f} ms, p99 {:.2f} ms{})".format(
                   limits["log_writes_per_s"], limits["log_write_p50_ms"],
                   limits["log_write_p99_ms"],
                   "" if limits.get("log_write_direct") else ", without O_DIRECT"))
    if "shared_log_write_p50_ms" in limits:
        log += ("; the same write by {} writers at once (the members of a cluster on one "
                "disk): {:,.0f}/s together (p50 {:.2f} ms, p99 {:.2f} ms)".format(
                    limits.get("shared_writers", 3), limits["shared_log_writes_per_s"],
                    limits["shared_log_write_p50_ms"], limits["shared_log_write_p99_ms"]))
    return ["Machine: {} cores; fsync of a growing file: {:,.0f}/s (p50 {:.2f} ms, p99 {:.2f} ms)"
            "{}; loopback TCP round trip p50 {:.1f} us, p99 {:.1f} us.".format(
                os.cpu_count(), limits.get("fsyncs_per_s", 0), limits.get("fsync_p50_ms", 0),
                limits.get("fsync_p99_ms", 0), log, limits.get("rtt_p50_us", 0),
                limits.get("rtt_p99_us", 0)), ""]


def floors(limits):
    """The physical floor of one raftlock command on this machine, in ms,
    from bench_limits' medians: raftlock acknowledges after a round trip
    from the client to the leader, one from the leader to a follower and
    that follower's durable write of the entry (the leader's own write
    overlaps the follower's). "shared" is the same with the write made
    while every member writes the one disk they share in this bench (None
    in runs without that figure). None without the machine's figures."""
    if not limits or not limits.get("rtt_p50_us") or not limits.get("fsync_p50_ms"):
        return None
    rtt = limits["rtt_p50_us"] / 1000.0
    write = limits.get("log_write_p50_ms") or limits["fsync_p50_ms"]
    shared_write = limits.get("shared_log_write_p50_ms")
    return {"rtt": rtt, "write": write, "measured_write": "log_write_p50_ms" in limits,
            "raftlock": 2 * rtt + write, "shared_write": shared_write,
            "writers": limits.get("shared_writers", 3),
            "shared": 2 * rtt + shared_write if shared_write else None}


def against(want, bound):
    return "above the floor" if want > bound else "below the floor"


def scale_goals(runs):
    """Issue 15's scale rows, when the run had them (run --scale-10x)."""
    out = []
    for r in runs:
        if r.get("workload") == "sessions" and r.get("clients", 0) >= 1000000:
            c, lost = r.get("leader_cpu_cores", -1), r.get("lost", -1)
            met = ok(r) and lost == 0 and 0 <= c < 0.5
            out.append("| live sessions: 1,000,000 with none lost, leader < 0.5 core (TTL {:.0f} "
                       "s) | {:,} sessions, {} lost, leader {:.2f} cores, {:,.0f} keepalives/s | "
                       "{} |".format(r.get("ttl_ms", 10000) / 1000.0,
                                     r.get("sessions_open", r.get("clients")), lost, c,
                                     r.get("pairs_per_s", 0), "met" if met else "NOT met"))
        if r.get("workload") == "state" and r.get("clients", 0) >= 10000000:
            v, held = r.get("restart_s", -2), r.get("locks_held", 0)
            met = ok(r) and held >= 10000000 and 0 <= v < 10
            out.append("| held locks: 10,000,000, cold restart to first read < 10 s, RSS per "
                       "node stated | {:,} held; first read {} after a cold restart; RSS {} MiB "
                       "(largest node, after the fill) | {} |".format(
                           held, "failed" if v < 0 else "{:.2f} s".format(v),
                           fmt(r.get("server_rss_mib")), "met" if met else "NOT met"))
    return out


def issue15(runs, limits):
    """Issue 15's points against Redis, each beside its physical floor:
    what no code can beat on this machine without weakening what an
    acknowledgement means (GUARANTEES), and whether the target lies above
    it; with the members' writes queued on one disk, beside that floor
    too."""
    fl = floors(limits)
    if fl is None:
        return []
    c, cs = fl["raftlock"], fl["shared"]
    rows, goals, beaten = [], [], []

    def shared_cells(rate, want, per_command):
        """The one-disk floor's cells for a point whose floor is
        per_command(ms) -> rate."""
        if cs is None:
            return "- | - |", ""
        bound = per_command(cs)
        return ("{} | {:.0%} of the rate |".format(fmt(bound), rate / bound),
                "; " + against(want, bound).replace("the floor", "the one-disk floor"))

    def beats(rate, bound, per_command, point):
        """The floors a measured rate beat: each is an estimate."""
        if rate > bound:
            return [point]
        if cs is not None and rate > per_command(cs):
            return [point + " (the one-disk floor)"]
        return []

    for n in (1, 16, 64, 256):
        rl, rd = find(runs, "raftlock", "uncontended", n), find(runs, "redis", "uncontended", n)
        if not ok(rl) or not ok(rd) or not rd["pairs_per_s"]:
            continue
        # One pair in flight per client, two commands a pair.
        def per_command(ms, n=n):
            return n * 1000.0 / (2 * ms)
        bound = per_command(c)
        want = (0.8 if n == 1 else 1.2) * rd["pairs_per_s"]
        cells, verdict = shared_cells(rl["pairs_per_s"], want, per_command)
        rows.append("| uncontended {} | {} pairs/s, p50 {:.2f} ms | {} pairs/s, p50 {:.2f} ms "
                    "| {:.0%} of the rate, p50 +{:.2f} ms | {} {} | {:.1f}x | {} pairs/s "
                    "({:.1f}x) | {}{} |".format(
                        n, fmt(rl["pairs_per_s"]), rl["p50_ms"], fmt(bound), c,
                        rl["pairs_per_s"] / bound, rl["p50_ms"] - c, cells,
                        fmt(rd["pairs_per_s"]), rl["pairs_per_s"] / rd["pairs_per_s"],
                        fmt(want), want / rd["pairs_per_s"], against(want, bound), verdict))
        beaten += beats(rl["pairs_per_s"], bound, per_command, "uncontended {}".format(n))
    rl, rd = find(runs, "raftlock", "contended", 16), find(runs, "redis", "contended", 16)
    if ok(rl) and ok(rd) and rl["pairs_per_s"] and rd["pairs_per_s"]:
        # A hand-over: the grant reaches the next holder (half a round trip),
        # its release the leader (another half) and commits (one command).
        def per_handover(ms):
            return 1000.0 / ms
        bound = per_handover(c)
        want = 1.2 * rd["pairs_per_s"]
        cells, verdict = shared_cells(rl["pairs_per_s"], want, per_handover)
        rows.append("| contended 16 | {} pairs/s, {:.2f} ms a hand-over | {} pairs/s, {:.2f} ms "
                    "a hand-over | {:.0%} of the rate | {} {} | {:.1f}x | {} pairs/s (1.2x) "
                    "| {}{} |".format(fmt(rl["pairs_per_s"]), 1000.0 / rl["pairs_per_s"],
                                      fmt(bound), c, rl["pairs_per_s"] / bound, cells,
                                      fmt(rd["pairs_per_s"]),
                                      rl["pairs_per_s"] / rd["pairs_per_s"], fmt(want),
                                      against(want, bound), verdict))
        beaten += beats(rl["pairs_per_s"], bound, per_handover, "contended 16")
    if not rows:
        return []
    for n in (1, 16, 64, 256):
        got = against_redis(runs, "uncontended", n)
        if got is not None:
            want = 0.8 if n == 1 else 1.2
            goals.append("| uncontended {}: >= {:.1f}x Redis pairs/s | {:.2f}x{} | {} |".format(
                n, want, got[0], got[1], "met" if got[0] >= want else "NOT met"))
    got = against_redis(runs, "contended", 16)
    if got is not None:
        goals.append("| contended 16: >= 1.2x Redis pairs/s, p99 below Redis's | {:.2f}x{}; "
                     "p99 {:.2f} against {:.2f} ms | {} |".format(
                         got[0], got[1], got[2][0], got[2][1],
                         "met" if got[0] >= 1.2 and got[2][0] < got[2][1] else "NOT met"))
    goals += scale_goals(runs)
    if beaten:
        goals.append("| the floor is an estimate from two medians | raftlock measured above it "
                     "at {}: not a floor in this run, and no verdict above is proof | - |"
                     .format(", ".join(beaten)))
    write = ("durable write into a preallocated file p50 {:.3f} ms".format(fl["write"])
             if fl["measured_write"] else
             "fsync of a growing file p50 {:.3f} ms (no preallocated-write figure in this "
             "run)".format(fl["write"]))
    shared = ""
    if cs is not None:
        shared = (" In this bench the members share one disk, and their writes queue on it: "
                  "the same durable write made by {} writers at once, each into a file of its "
                  "own, takes p50 {:.3f} ms, so a command's floor with the members on one disk "
                  "is 2 x {:.3f} + {:.3f} = **{:.3f} ms**. A target above that floor cannot be "
                  "met by this cluster on this machine, whatever the code; it could be on "
                  "a machine with a disk per member.".format(
                      fl["writers"], fl["shared_write"], fl["rtt"], fl["shared_write"], cs))
    return section(
        "### The physical floor (issue 15)",
        "A raftlock command is acknowledged after a round trip from the client to the "
        "leader, one from the leader to a follower and that follower's durable write (the "
        "leader's own write overlaps it): at least 2 x {:.3f} ms (loopback round trip p50) "
        "+ {} = **{:.3f} ms** here (medians: an estimate), so a client with one pair at a time makes at most "
        "1 / (2 x {:.3f} ms) pairs/s, n clients n times that, and a hand-over on a "
        "contended lock takes at least one such command. A Redis command (appendfsync "
        "always) needs one round trip and one append with fsync: a replicated command "
        "needs a round trip more. CPU is not in the floor, so past one client the floor "
        "is far above what two cores reach.{} Each target against Redis is judged by "
        "rounds where the run has them (a raftlock window, then a Redis one, back to "
        "back: the median of the rounds' ratios), else by the rows of the main table, "
        "taken minutes apart.".format(fl["rtt"], write, c, c, shared),
        "| point | raftlock | its floor | raftlock against the floor | its floor, the members "
        "on one disk | raftlock against that floor | Redis | raftlock/Redis | target "
        "| the target against each floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|", rows, goals)


def plots(d, runs):
    if shutil.which("gnuplot") is None:
        return []
    made = []
    data = os.path.join(d, "plot-data")
    os.makedirs(data, exist_ok=True)
    # Throughput against clients, uncontended.
    lines = []
    for s in SYSTEMS:
        pts = sorted((r["clients"], r["pairs_per_s"]) for r in runs
                     if r.get("system") == s and r.get("workload") == "uncontended"
                     and ok(r))
        if not pts:
            continue
        f = os.path.join(data, "throughput-{}.dat".format(s))
        with open(f, "w") as fh:
            for n, p in pts:
                fh.write("{} {}\n".format(n, p))
        lines.append("'{}' using 1:2 with linespoints lw 2 lc rgb '{}' title '{}'".format(
            f, COLORS[s], s))
    scripts = []
    if lines:
        png = os.path.join(d, "throughput.png")
        scripts.append("\n".join([
            "set terminal pngcairo size 900,560" if "cairo" in gnuplot_terms() else
            "set terminal png size 900,560",
            "set output '{}'".format(png),
            "set title 'Uncontended lock+unlock pairs per second (client i locks its own name)'",
            "set xlabel 'clients'", "set ylabel 'pairs/s'",
            "set logscale xy 2", "set logscale y 10", "set grid", "set key top left",
            "plot " + ", ".join(lines)]))
        made.append("throughput.png")
    # Latency CDFs, one plot per (workload, clients).
    cdfdir = os.path.join(d, "cdf")
    groups = {}
    if os.path.isdir(cdfdir):
        for name in sorted(os.listdir(cdfdir)):
            if not name.endswith(".txt"):
                continue
            # the longest system name that prefixes it: raftlock-tls-... is not raftlock's
            for s in sorted(SYSTEMS, key=len, reverse=True):
                if name.startswith(s + "-"):
                    rest = name[len(s) + 1:-4]
                    groups.setdefault(rest, []).append((s, os.path.join(cdfdir, name)))
                    break
    for rest, files in sorted(groups.items()):
        png = os.path.join(d, "cdf-{}.png".format(rest))
        files.sort(key=lambda sf: SYSTEMS.index(sf[0]))
        plotted = ["'{}' using 2:1 with lines lw 2 lc rgb '{}' title '{}'".format(
            f, COLORS[s], s) for s, f in files if os.path.getsize(f) > 0]
        if not plotted:
            continue
        wl, n = rest.rsplit("-", 1)
        what = "keepalive" if wl == "sessions" else "acquire"
        scripts.append("\n".join([
            "set terminal pngcairo size 900,560" if "cairo" in gnuplot_terms() else
            "set terminal png size 900,560",
            "set output '{}'".format(png),
            "set title '{} latency CDF: {}, {} {}'".format(
                what.capitalize(), wl, n, "sessions" if wl == "sessions" else "clients"),
            "set xlabel '{} latency (ms, log scale)'".format(what),
            "set ylabel 'fraction of {}s'".format(what),
            "set logscale x 10", "set yrange [0:1]", "set grid", "set key bottom right",
            "plot " + ", ".join(plotted)]))
        made.append(os.path.basename(png))
    for sc in scripts:
        subprocess.run(["gnuplot"], input=sc.encode(), check=False)
    return [m for m in made if os.path.exists(os.path.join(d, m))]


_terms = None


def gnuplot_terms():
    global _terms
    if _terms is None:
        try:
            _terms = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True,
                                    text=True).stderr + "x"
        except OSError:
            _terms = ""
    return _terms


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[1] == "--tls-summary":
        print(tls_summary(load(os.path.join(args[0], "results.jsonl")), int(args[2])))
        return 0
    publish = None
    if len(args) == 3 and args[1] == "--publish":
        publish = args[2]
        args = args[:1]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    d = args[0]
    runs = load(os.path.join(d, "results.jsonl"))
    limits = None
    lp = os.path.join(d, "limits.json")
    if os.path.exists(lp):
        ll = load(lp)
        limits = ll[0] if ll else None
    stamp = os.path.basename(os.path.normpath(d))
    # the commit the run began on (run writes it); else the tree's now
    cp = os.path.join(d, "commit")
    if os.path.exists(cp):
        with open(cp) as f:
            commit = f.read().strip()
    else:
        commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                                 "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump({"run": stamp, "commit": commit, "machine": limits, "runs": runs}, f,
                  indent=1)
    pngs = plots(d, runs)
    md = ["## Benchmark run {} (commit {})".format(stamp, commit or "?"), ""]
    md += machine_line(limits)
    md += ["Same machine, same run: a 3-node raftlock cluster, a 3-member etcd 3.4 cluster "
           "(default durable settings, clientv3/concurrency Session + Mutex), and one Redis 7 "
           "node (appendfsync always; SET NX PX, compare-and-delete release; a busy client "
           "polls every 1 ms). A pair is acquire + release; latency is the acquire's.", ""]
    md += lock_table(runs)
    md += scale_tables(runs)
    md += targets(runs)
    md += tls_cost(runs)
    md += blocking_calls(runs)
    md += issue15(runs, limits)
    md += notes(d, runs)
    if pngs:
        md += ["", "Plots: " + ", ".join("[{0}]({0})".format(p) for p in pngs)]
    md.append("")
    with open(os.path.join(d, "results.md"), "w") as f:
        f.write("\n".join(md))
    if publish:
        plots_dir = os.path.join(publish, "plots")
        if os.path.isdir(plots_dir):
            shutil.rmtree(plots_dir)
        os.makedirs(plots_dir)
        for p in pngs:
            shutil.copy(os.path.join(d, p), plots_dir)
        text = "\n".join(md)
        for p in pngs:
            text = text.replace("]({})".format(p), "](plots/{})".format(p))
        text = ("<!-- Written by tests/bench/run --publish; the raw lines are in "
                "RESULTS.jsonl. -->\n" + text)
        path = os.path.join(publish, "RESULTS.md")
        text += hand_written_sections(path)
        with open(path, "w") as f:
            f.write(text)
        shutil.copy(os.path.join(d, "results.jsonl"), os.path.join(publish, "RESULTS.jsonl"))
    return 0


HAND_MARK = "<!-- Written by hand"


def hand_written_sections(path):
    """The sections of the published file written by hand (each opens with
    HAND_MARK), from the first of them to the end: a new run replaces only
    the generated table above them."""
    try:
        with open(path) as f:
            old = f.read()
    except FileNotFoundError:
        return ""
    at = old.find(HAND_MARK)
    return "" if at < 0 else "\n\n" + old[at:]


if __name__ == "__main__":
    sys.exit(main())
