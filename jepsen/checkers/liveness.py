"""Checker 6: liveness.

Progress: in every stretch in which a majority of the cluster was healthy
and connected (checkers/majority.py: also during a kill, pause or clock
rate of a minority, or a partition that leaves a majority side; not
during restart-all, a clock rate on every node, a ring partition or a
membership change), every span of the bound's length up to the clients'
last acquire holds an acknowledged grant. The bound covers a leader
lost at the worst moment, the clients finding the new one, and a holder
that stopped renewing (jepsen/README.md says how it is made up), so a
stretch shorter than the bound cannot fail; one that opens with the
undo of a fault is a heal that must be followed by a grant within the
bound, whatever fault comes next, as long as that fault leaves a
majority.

Heals (nemesis "end" events): the time until the first grant
acknowledged after each (after its undo began: an undo that restarts
nodes logs its end once they serve), reported; more than the bound is a
violation. A heal followed by the next fault before any grant and before
the bound has passed is "interrupted": the progress rule above judges it
unless that fault left no healthy majority. A history whose last heal
has no grant at all after it is a violation.

Per lock, in the same stretches (the harness keeps the workers going after
the final heal until every lock tried after it was granted, or the bound
passed): from any attempt on a lock, it is granted within the bound,
unless the history shows someone who could hold it throughout (an
acknowledged grant not yet released, or an acquire whose outcome is
unknown, of a worker not killed by then: a killed worker's session
lapses within the TTL the bound allows). "Some grant on some lock" is not
enough: a lock held by a holder nobody knows of (a retried acquire
executed twice) starves its waiters while the other locks flow.
"""

import bisect

from . import history as H
from . import majority as M

MAX_REPORTED = 20


def check(events, ops, bound_s, nodes=3):
    bound = bound_s * 1e9
    nem = H.nemesis_events(events)
    # A fault counts from the moment it began to act (membership changes
    # and clock rates act long before their start event).
    starts = sorted(ev.get("began", ev["time"]) for ev in nem
                    if ev["type"] == "start")
    # A heal counts from when its undo began: a restarted node's end event
    # comes once it serves again.
    heals = sorted((ev.get("began", ev["time"]), ev.get("f")) for ev in nem
                   if ev["type"] == "end")
    grants = sorted(op.cmp for op in ops
                    if op.f == "acquire" and op.type == "ok")
    end_of_history = events[-1]["time"] if events else 0

    measured = []
    violations = []
    interrupted = 0
    for i, (t, f) in enumerate(heals):
        j = bisect.bisect_left(grants, t)
        first = grants[j] if j < len(grants) else None
        k = bisect.bisect_right(starts, t)
        next_fault = starts[k] if k < len(starts) else None
        last = i == len(heals) - 1
        if first is not None and (next_fault is None or first <= next_fault):
            delay = first - t
            measured.append(delay)
            if delay > bound:
                violations.append({"what": "no grant within the bound after "
                                   "a heal", "nemesis": f, "heal": t,
                                   "seconds": round(delay / 1e9, 3)})
            continue
        if next_fault is not None and next_fault - t < bound:
            interrupted += 1
            continue
        if last or (next_fault is not None) or end_of_history - t >= bound:
            violations.append({"what": "no grant after a heal", "nemesis": f,
                               "heal": t})
    if not grants:
        violations.append({"what": "no grant in the whole history"})
    windows = M.healthy_windows(events, nodes)
    progress = _progress(ops, bound, grants, windows, violations)
    before = len(violations)
    locks_checked = _per_lock(events, ops, bound, windows, violations)
    starved = len(violations) - before
    return {
        "valid": not violations,
        "bound_seconds": bound_s,
        "locks_checked": locks_checked,
        "per_lock_violations": starved,
        "heals": len(heals),
        "measured": len(measured),
        "interrupted": interrupted,
        "nodes": nodes,
        "healthy_windows": progress["windows"],
        "healthy_seconds_judged": progress["judged_seconds"],
        "max_healthy_gap_seconds": progress["max_gap_seconds"],
        "max_seconds": round(max(measured) / 1e9, 3) if measured else None,
        "mean_seconds": (round(sum(measured) / len(measured) / 1e9, 3)
                         if measured else None),
        "violations": violations[:MAX_REPORTED],
        "violation_count": len(violations),
    }


def _progress(ops, bound, grants, windows, violations):
    """The progress rule above; returns what it judged."""
    tries = [op.inv for op in ops if op.f == "acquire"]
    last_try = max(tries) if tries else None
    judged = 0
    worst = 0
    counted = 0
    for a, b in windows:
        if last_try is None or a >= last_try:
            break
        b = min(b, last_try)
        counted += 1
        if b - a >= bound:
            judged += b - a
        points = [a] + grants[bisect.bisect_left(grants, a):
                              bisect.bisect_right(grants, b)] + [b]
        for x, y in zip(points, points[1:]):
            worst = max(worst, y - x)
            if y - x > bound:
                k = bisect.bisect_right(grants, x)
                violations.append({
                    "what": "no grant within the bound while a majority "
                            "was healthy and connected",
                    "from": x, "next_grant": grants[k] if k < len(grants)
                    else None, "window": [a, b],
                    "seconds": round((y - x) / 1e9, 3)})
    return {"windows": counted, "judged_seconds": round(judged / 1e9, 3),
            "max_gap_seconds": round(worst / 1e9, 3)}


def _merge(wins):
    """The union of (start, end) windows as sorted disjoint intervals."""
    out = []
    for a, b in sorted(wins):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _covered(held, a, b):
    """Whether the merged intervals cover all of [a, b]."""
    return any(hs <= a and b <= he for hs, he in held)


def _per_lock(events, ops, bound, windows, violations):
    """The per-lock rule above; returns how many locks it judged."""
    grants = H.grants_with_releases(ops)
    # A worker the nemesis killed holds nothing it could still use after
    # its SIGKILL: its session lapses within a TTL, which the bound covers
    # (a holder that stopped renewing), so its grants and unknown
    # acquires excuse no wait past that moment (linear.py, judging
    # safety, keeps them until the session ends).
    killed = H.killed_at(events)
    checked = 0
    for lock in sorted({op.lock for op in ops if op.f == "acquire"
                        and op.lock is not None}, key=str):
        tried = sorted(op.inv for op in ops if op.f == "acquire"
                       and op.lock == lock)
        granted = sorted(op.cmp for op in ops if op.f == "acquire"
                         and op.lock == lock and op.type == "ok")
        held = None
        judged = False
        for a, b in windows:
            cursor = a
            while True:
                # A stretch: from an attempt to the first grant after it.
                i = bisect.bisect_left(tried, cursor)
                if i == len(tried) or tried[i] + bound > b:
                    break  # none, or the window ends too soon to judge
                first = tried[i]
                j = bisect.bisect_left(granted, first)
                grant = granted[j] if j < len(granted) else None
                judged = True
                if grant is not None and grant - first <= bound:
                    cursor = grant + 1
                    continue
                if held is None:
                    mine = [(g, r) for g, r in grants if g.lock == lock]
                    held = _merge((s, min(e, killed.get(p, H.INF)))
                                  for s, e, p in
                                  H.possibly_held(ops, mine, lock))
                if not _covered(held, first, first + bound):
                    violations.append({
                        "what": "a lock tried while a majority was healthy "
                                "was not granted within the bound, and "
                                "nobody could hold it throughout",
                        "lock": lock, "first_attempt": first,
                        "first_grant": grant,
                        "bound_seconds": round(bound / 1e9, 3)})
                if grant is None:
                    break
                cursor = grant + 1
        checked += judged
    return checked
