"""Checker 6: liveness after the nemesis heals.

For every heal (a nemesis "end" event), the time until the first grant
acknowledged after it. A heal followed by the next fault before any grant
and before the bound has passed is "interrupted" and proves nothing. A
heal with no grant within the bound is a violation, and so is a history
whose last heal has no grant at all after it.
"""

import bisect

from . import history as H

MAX_REPORTED = 20


def check(events, ops, bound_s):
    bound = bound_s * 1e9
    nem = H.nemesis_events(events)
    starts = sorted(ev["time"] for ev in nem if ev["type"] == "start")
    heals = sorted((ev["time"], ev.get("f")) for ev in nem
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
    return {
        "valid": not violations,
        "bound_seconds": bound_s,
        "heals": len(heals),
        "measured": len(measured),
        "interrupted": interrupted,
        "max_seconds": round(max(measured) / 1e9, 3) if measured else None,
        "mean_seconds": (round(sum(measured) / len(measured) / 1e9, 3)
                         if measured else None),
        "violations": violations[:MAX_REPORTED],
        "violation_count": len(violations),
    }
