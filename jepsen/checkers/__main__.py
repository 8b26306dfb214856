"""Runs every checker on a history and writes results.json.

    python3 -m checkers HISTORY [--out results.json] [--ttl-ms 3000]
                        [--liveness-bound-s 20] [--rho 0.01] [--nodes 3]

Exit status: 0 when every checker passed, 1 on any violation, 2 when the
history could not be read.
"""

import argparse
import json
import sys

from . import counter, durability, fencing, history, lease, linear, liveness, observe, waits


def shortens_leases(rate, rho):
    """Cluster time runs on the leader's monotonic clock and a session
    expires TTL of cluster time after its renewal (GUARANTEES, Terms and
    rule 7; server/cluster_clock.h): a server clock faster than 1 + rho
    can expire a session while its holder still believes its lease valid.
    A slower one only makes leases last longer: it excuses nothing."""
    return rate - 1.0 > rho


def drift_windows(events, rho, ttl_ms):
    """Intervals in which a server clock ran faster than the design
    tolerates, stretched by one TTL (sessions renewed under the drift may
    expire early up to that long after it)."""
    wins = []
    open_ = {}
    for ev in history.nemesis_events(events):
        if ev.get("f") != "clock-rate":
            continue
        key = json.dumps(ev.get("targets"), sort_keys=True)
        if ev["type"] == "start":
            open_[key] = ev
        elif ev["type"] == "end" and key in open_:
            st = open_.pop(key)
            rate = st.get("rate", 1.0)
            if shortens_leases(rate, rho):
                # The drift stops when the undo begins (it kills the node).
                healed = ev.get("began", ev["time"])
                wins.append((st["time"], healed + ttl_ms * 1e6, rate))
    end = events[-1]["time"] if events else 0
    for st in open_.values():
        rate = st.get("rate", 1.0)
        if shortens_leases(rate, rho):
            wins.append((st["time"], end, rate))
    return wins


def run(events, ttl_ms=3000, liveness_bound_s=20.0, rho=0.01, nodes=3):
    ops = history.pair(events)
    wins = drift_windows(events, rho, ttl_ms)
    nem = history.nemesis_events(events)
    results = {
        "fencing": fencing.check(events, ops),
        "lease": lease.check(events, ops, wins),
        "linearizable": linear.check(events, ops),
        "durability": durability.check(events, ops, wins),
        "counter": counter.check(events, ops),
        "liveness": liveness.check(events, ops, liveness_bound_s, nodes),
        "waits": waits.check(events, ops),
        "observe": observe.check(events, ops),
    }
    failed_nemesis = [ev for ev in nem if ev["type"] == "fail"]
    # A server that exited on its own is a bug whatever the history says.
    crashes = [{k: v for k, v in ev.items() if not k.startswith("_")}
               for ev in nem if ev.get("f") == "node-crash"]
    counts = {}
    for op in ops:
        k = "%s:%s" % (op.f, op.type)
        counts[k] = counts.get(k, 0) + 1
    summary = {
        "valid": all(r["valid"] for r in results.values())
        and not failed_nemesis and not crashes,
        "node_crashes": crashes,
        "ops": len(ops),
        "op_counts": counts,
        "nemesis_actions": sum(1 for ev in nem if ev["type"] == "start"),
        "nemesis_failures": [
            {k: v for k, v in ev.items() if not k.startswith("_")}
            for ev in failed_nemesis],
        "rho": rho,
        "drift_windows": [{"start": s, "end": e, "rate": r}
                          for s, e, r in wins],
    }
    if events:
        summary["seconds"] = round(
            (events[-1]["time"] - events[0]["time"]) / 1e9, 3)
    results["summary"] = summary
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m checkers")
    ap.add_argument("history")
    ap.add_argument("--out")
    ap.add_argument("--ttl-ms", type=int, default=3000)
    ap.add_argument("--liveness-bound-s", type=float, default=20.0)
    ap.add_argument("--rho", type=float, default=0.01)
    ap.add_argument("--nodes", type=int, default=3,
                    help="cluster size (which faults leave a majority)")
    ap.add_argument("--extra", help="JSON object merged into summary")
    args = ap.parse_args(argv)
    try:
        events = history.load(args.history)
        res = run(events, args.ttl_ms, args.liveness_bound_s, args.rho,
                  args.nodes)
    except (OSError, ValueError) as e:
        print("checkers: %s" % e, file=sys.stderr)
        return 2
    if args.extra:
        res["summary"].update(json.loads(args.extra))
    text = json.dumps(res, indent=2, sort_keys=True, default=str)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    for name in ("fencing", "lease", "linearizable", "durability",
                 "counter", "liveness", "waits"):
        r = res[name]
        extra = ""
        if name == "liveness":
            extra = " max %ss after a heal, %ss without a grant in %ss " \
                "judged, bound %ss" % (r["max_seconds"],
                                       r["max_healthy_gap_seconds"],
                                       r["healthy_seconds_judged"],
                                       r["bound_seconds"])
        if name == "waits":
            extra = " max %ss over the timeout, bound %ss" % (
                r["max_over_seconds"], r["bound_seconds"])
        if name == "lease" and r["drift_overlap_count"]:
            extra = " (%d overlaps under clock drift beyond rho)" % \
                r["drift_overlap_count"]
        print("%-13s %s%s" % (name, "PASS" if r["valid"] else
                              "FAIL (%d)" % r["violation_count"], extra))
    s = res["summary"]
    if s["nemesis_failures"]:
        print("nemesis       FAIL (%d actions could not act)" %
              len(s["nemesis_failures"]))
    if s["node_crashes"]:
        print("nodes         FAIL (%d exited on their own)" %
              len(s["node_crashes"]))
    print("ops %d, verdict %s" % (s["ops"], "PASS" if s["valid"] else "FAIL"))
    return 0 if s["valid"] else 1


if __name__ == "__main__":
    sys.exit(main())
