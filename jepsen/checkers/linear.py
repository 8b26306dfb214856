"""Checker 3: linearizability of lock operations, per lock.

Model: a mutex (one holder) or a semaphore (N holders). A holder's grant
ends by its release or by the expiry of its session, an event no client
sees, which may happen at any point after the grant. Tokens are strictly
increasing, so the order of grants in any linearization is their token
order: no search is needed.

Mutex. In token order, each grant's linearization point must fall inside its
[invocation, completion]; the grant before it must have ended before it: by
its acknowledged release, whose point lies in that release's window, or by
an expiry or an unknown release, which can be placed right after its grant.
Points are placed as early as possible (optimal for a chain). Operations
whose outcome is unknown (info) may or may not have happened: an unknown
acquire is a grant that may lie anywhere, an unknown release may be absent.

Both models: an acknowledged release proves the session held the grant
continuously from its grant to its release, so the intervals
[grant completion, release invocation] of released grants are certainly
held: more than N of them may not overlap. An acquire refused with EBUSY,
or a wait that ended in ETIMEDOUT, needs a moment inside its window at
which the lock could have been full (a holder the history cannot account
for, such as a retried acquire executed twice, shows up here);
A lock set refused so needs such a moment on one of its locks, not on
each: one full lock is enough to turn the set away. A release acknowledged
for a handle that was never granted, or through a handle that holds
nothing (logged without a token), is a violation.
"""

from . import history as H

MAX_REPORTED = 20

# An acquire that failed for one of these says the lock was full at some
# moment of its window: EBUSY (a try), ETIMEDOUT (a wait that was not
# granted before its timeout and is no longer queued: had the lock been
# free while it waited, the FIFO queue would have granted it or one ahead).
REFUSED_AS_HELD = ("EBUSY", "ETIMEDOUT")


def _max_overlap(wins, lo, hi):
    """Largest number of windows open at one instant of [lo, hi]. The
    refused acquire's own handle is new, so it is never among them; an
    earlier handle of the same process may be (an unknown release)."""
    pts = []
    for s, e, _ in wins:
        if e < lo or s > hi:
            continue
        pts.append((max(s, lo), 1))
        pts.append((min(e, hi), -1))
    pts.sort(key=lambda x: (x[0], -x[1]))
    best = cur = 0
    for _, d in pts:
        cur += d
        best = max(best, cur)
    return best


def _check_chain(lock, grants, violations):
    t = -H.INF
    prev = None
    for g, r in sorted(grants, key=lambda gr: gr[0].token):
        lp = max(t, g.inv)
        if lp > g.cmp:
            violations.append({
                "what": "grant cannot be linearized after the previous "
                        "holder's release",
                "lock": lock, "grant": g.describe(),
                "previous": prev[0].describe() if prev else None,
                "previous_release": (prev[1].describe()
                                     if prev and prev[1] else None),
            })
            lp = g.cmp  # keep checking the rest from a consistent point
        if r is not None and r.type == "ok":
            lr = max(lp, r.inv)
            if lr > r.cmp:
                violations.append({"what": "release completed before its "
                                   "grant could be linearized",
                                   "lock": lock, "release": r.describe(),
                                   "grant": g.describe()})
                lr = r.cmp
            t = lr
        else:
            t = lp
        prev = (g, r)


def _check_certain_overlap(lock, kind, limit, grants, violations):
    pts = []
    for g, r in grants:
        if r is not None and r.type == "ok" and r.inv > g.cmp:
            pts.append((g.cmp, 1, g))
            pts.append((r.inv, -1, g))
    pts.sort(key=lambda x: (x[0], x[1]))
    active = []
    for _, d, g in pts:
        if d < 0:
            active.remove(g)
            continue
        active.append(g)
        if kind == "rwlock":
            bad = len(active) > 1 and any(x.mode == "exclusive"
                                          for x in active)
        else:
            bad = len(active) > limit
        if bad:
            violations.append({
                "what": "more acknowledged holders than the lock allows, "
                        "each proven by its acknowledged release",
                "lock": lock, "limit": limit,
                "holders": [x.describe() for x in active],
            })


def check(events, ops):
    kinds = H.lock_kinds(ops)
    all_grants = H.grants_with_releases(ops)
    violations = []
    busy_checked = 0

    locks = sorted({op.lock for op in ops if op.lock is not None and
                    op.f in ("acquire", "release")}, key=str)
    for lock in locks:
        kind, limit = kinds.get(lock, ("mutex", 1))
        grants = [(g, r) for g, r in all_grants if g.lock == lock]
        if kind == "mutex":
            _check_chain(lock, grants, violations)
        _check_certain_overlap(lock, kind, limit, grants, violations)

    # Acquires refused as busy, a lock set's once (its first lock's part).
    wins = {}
    for op in ops:
        if op.f != "acquire" or op.type != "fail" \
                or op.error not in REFUSED_AS_HELD or op.lock is None \
                or (op.set_parts is not None and op.part != 0):
            continue
        found = []
        for part in op.set_parts or [op]:
            kind, limit = kinds.get(part.lock, ("mutex", 1))
            if kind == "rwlock" and part.mode == "shared":
                break  # a queued writer also turns readers away
            if part is op:
                busy_checked += 1
            if part.lock not in wins:
                wins[part.lock] = H.possibly_held(
                    ops, [(g, r) for g, r in all_grants if g.lock == part.lock],
                    part.lock)
            n = _max_overlap(wins[part.lock], op.inv, op.cmp)
            if n >= limit:
                break
            found.append((part.lock, n, limit))
        else:
            violations.append({
                "what": "acquire refused as busy (%s) while the lock "
                        "could not have been full" % op.error,
                "lock": op.lock if len(found) == 1 else [f[0] for f in found],
                "op": op.describe(),
                "possible_holders": found[0][1] if len(found) == 1
                else [f[1] for f in found],
                "limit": found[0][2] if len(found) == 1 else [f[2] for f in found],
            })

    # A handle granted and not released is refused its release as not
    # holding (ENOTHOLDER): the server lost a grant of a session that still
    # lives (an expired session gets ESESSION), or ran a retried release
    # twice. Never in a correct run.
    revoked = H.revoked_at(events)
    for g, r in all_grants:
        if (g.lock, g.token) in revoked:
            continue  # an admin took it: its release is refused
        if r is not None and r.type == "fail" and r.error == "ENOTHOLDER":
            violations.append({
                "what": "release of a granted handle refused as not "
                        "holding: the grant was lost or the release ran "
                        "twice",
                "grant": g.describe(), "release": r.describe()})

    # Releases acknowledged without a grant to release; nesting depths.
    state = {}
    nested = {}
    for op in ops:
        key = (op.process, op.lock)
        if op.f == "acquire":
            state[key] = op.type  # ok, info or fail
            nested[key] = False
        elif op.f == "reacquire":
            nested[key] = op.type == "ok"
        elif op.f == "rerelease" and op.type == "ok" and nested.get(key):
            if op.value != 1:
                violations.append({
                    "what": "releasing a nested grant left the wrong depth",
                    "op": op.describe(), "depth_left": op.value})
        elif op.f == "release":
            last = state.pop(key, None)
            if op.type != "ok":
                continue
            if not op.token:
                # The worker logs the grant's token on every release of a
                # granted handle; one without is through a fresh handle
                # that holds nothing, whatever the process's last acquire
                # (one of unknown outcome lives on in another handle).
                violations.append({
                    "what": "release acknowledged through a handle that "
                            "holds nothing (only ENOTHOLDER is right)",
                    "op": op.describe()})
            elif last not in ("ok", "info"):
                violations.append({
                    "what": "release acknowledged for a handle that was "
                            "never granted",
                    "op": op.describe()})

    return {
        "valid": not violations,
        "locks": len(locks),
        "grants": len(all_grants),
        "busy_checked": busy_checked,
        "violations": violations[:MAX_REPORTED],
        "violation_count": len(violations),
    }
