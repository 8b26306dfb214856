"""Checker 2: mutual exclusion by lease.

Each acknowledged grant gives its holder the interval
    [grant completion, min(release invocation, holder's valid_until)]
where valid_until is the latest lease validity the holder's client library
reported for that session while it held (converted to CLOCK_MONOTONIC).
No two such intervals of an exclusive lock may overlap, and no more than N
of a semaphore with N permits.
"""

import bisect

from . import history as H

MAX_REPORTED = 20


def holder_intervals(events, ops):
    """Returns a list of (lock, start, end, grant op)."""
    validity = H.session_validity(events)
    killed = H.killed_at(events)
    revoked = H.revoked_at(events)
    # The sample times of each session, listed once (not once per grant:
    # a run has thousands of grants).
    times_of = {k: [t for t, _ in v] for k, v in validity.items()}
    out = []
    for g, r in H.grants_with_releases(ops):
        start = g.cmp
        stop = r.inv if r is not None else H.INF
        samples = validity.get((g.process, g.session), [])
        times = times_of.get((g.process, g.session), [])
        # Samples taken from the grant on, until the holder let go.
        lo = bisect.bisect_left(times, start)
        hi = bisect.bisect_right(times, stop)
        vmax = None
        for _, v in samples[lo:hi]:
            if vmax is None or v > vmax:
                vmax = v
        if g.valid_until and (vmax is None or g.valid_until > vmax):
            vmax = g.valid_until
        if vmax is None:
            end = start  # the holder never believed its lease valid
        else:
            end = min(stop, vmax)
        end = min(end, killed.get(g.process, H.INF),
                  revoked.get((g.lock, g.token), H.INF))
        if end < start:
            end = start
        out.append((g.lock, start, end, g))
    return out


def check(events, ops, drift_windows=None):
    """drift_windows: list of (start, end, rate) in which a server clock ran
    at `rate`, fast enough to end leases early. An overlap that begins
    inside one is kept and reported as caused by that drift."""
    kinds = H.lock_kinds(ops)
    by_lock = {}
    for lock, s, e, g in holder_intervals(events, ops):
        by_lock.setdefault(lock, []).append((s, e, g))

    violations = []
    held_ns = 0
    for lock, ivs in by_lock.items():
        kind, limit = kinds.get(lock, ("mutex", 1))
        ivs.sort(key=lambda x: x[0])
        # Sweep: ends before starts at equal times (closed-open intervals
        # that only touch do not overlap).
        points = []
        for idx, (s, e, g) in enumerate(ivs):
            held_ns += e - s
            if e > s:
                points.append((s, 1, idx))
                points.append((e, 0, idx))
        points.sort()
        active = set()
        for t, is_start, idx in points:
            if not is_start:
                active.discard(idx)
                continue
            active.add(idx)
            if kind == "rwlock":
                modes = [ivs[j][2].mode for j in active]
                bad = len(active) > 1 and "exclusive" in modes
            else:
                bad = len(active) > limit
            if bad:
                holders = [ivs[j] for j in sorted(active)]
                violations.append({
                    "what": ("a writer overlaps another holder"
                             if kind == "rwlock" else
                             "two holders of an exclusive lock overlap"
                             if limit == 1 else
                             "more holders than permits overlap"),
                    "lock": lock, "kind": kind, "limit": limit, "time": t,
                    "holders": [dict(g.describe(), interval=[s, e],
                                     mode=g.mode)
                                for s, e, g in holders],
                })
    caused = []
    uncaused = []
    for v in violations:
        cause = None
        for (ws, we, rate) in drift_windows or []:
            # The overlap begins when a later holder is granted: the early
            # expiry before it must fall in the window.
            if ws <= v["time"] <= we:
                cause = rate
                break
        if cause is not None:
            v["clock_rate"] = cause
            caused.append(v)
        else:
            uncaused.append(v)
    return {
        "valid": not uncaused,
        "holds": sum(len(v) for v in by_lock.values()),
        "held_seconds": round(held_ns / 1e9, 3),
        "violations": uncaused[:MAX_REPORTED],
        "violation_count": len(uncaused),
        "drift_overlaps": caused[:MAX_REPORTED],
        "drift_overlap_count": len(caused),
    }
