"""Checker 1: fencing tokens.

- The fenced register never accepted, for one lock, a token lower than one
  it had already accepted for that lock.
- Every acknowledged grant's token is unique, and larger than the token of
  every grant acknowledged before this grant was invoked (the counter is
  global: strictly increasing over the life of the cluster).
"""

from . import history as H

MAX_REPORTED = 20


def check(events, ops):
    violations = []

    # The register's own log.
    highest = {}
    accepted = refused = 0
    for ev in H.register_events(events):
        lock = ev.get("lock")
        tok = ev.get("token")
        if ev["type"] == "accept":
            accepted += 1
            h = highest.get(lock)
            if h is not None and tok < h:
                violations.append({
                    "what": "register accepted a lower token",
                    "lock": lock, "token": tok, "highest_before": h,
                    "time": ev["time"], "client": ev.get("client"),
                })
            # Readers of a read-write lock share it: their reads do not
            # raise the bar (DESIGN.md rule 7: writers' tokens do).
            if (h is None or tok > h) and not ev.get("shared"):
                highest[lock] = tok
        elif ev["type"] == "refuse":
            refused += 1

    # Grants as the clients saw them.
    grants = [op for op in ops if op.f == "acquire" and op.type == "ok"]
    by_token = {}
    for g in grants:
        if g.token is None:
            violations.append({"what": "grant without a token",
                               "op": g.describe()})
            continue
        other = by_token.get(g.token)
        if other is not None:
            violations.append({"what": "two grants with one token",
                               "token": g.token, "first": other.describe(),
                               "second": g.describe()})
        else:
            by_token[g.token] = g

    # A re-entrant acquire keeps the token of the grant it nests in.
    last = {}
    for op in ops:
        key = (op.process, op.lock)
        if op.f == "acquire":
            last[key] = op
        elif op.f == "reacquire" and op.type == "ok":
            g = last.get(key)
            if g is not None and g.type == "ok" and op.token != g.token:
                violations.append({
                    "what": "re-entrant acquire returned another token",
                    "grant": g.describe(), "reacquire": op.describe()})

    # Sweep invocations in time order; keep the largest token among grants
    # acknowledged strictly before.
    done = sorted((g for g in grants if g.token is not None),
                  key=lambda g: g.cmp)
    i = 0
    best = None
    for g in sorted((g for g in grants if g.token is not None),
                    key=lambda g: g.inv):
        while i < len(done) and done[i].cmp < g.inv:
            if best is None or done[i].token > best.token:
                best = done[i]
            i += 1
        if best is not None and g.token <= best.token and best is not g:
            violations.append({
                "what": "grant token not above an earlier acknowledged grant",
                "grant": g.describe(), "earlier": best.describe(),
            })

    return {
        "valid": not violations,
        "grants": len(grants),
        "register_accepted": accepted,
        "register_refused": refused,
        "max_token": max(by_token) if by_token else None,
        "violations": violations[:MAX_REPORTED],
        "violation_count": len(violations),
    }
