"""Checker 7: elections seen by observers (docs/GUARANTEES.md rule 20).

Observers (process "observer-N", type "observe") log each change of an
election's (leader, value, token) that raftlock_observe() reports, with
its log position (index, offset) and whether the history was read again
(lost). Per observer and election:
  - positions strictly increase (changes in log order, none twice);
  - the tokens of successive leaders never decrease (a new leader has a
    higher token; a proclaim keeps the token);
  - every leader token seen is one some campaigner was granted or may
    have been (an acquire that completed ok or with an unknown outcome).
That no two campaigners believed they led with valid leases at once is the
lease checker's, on the campaigners' acquire/release operations.
"""

MAX_REPORTED = 20


def is_observation(ev):
    return ev.get("type") == "observe" and str(ev.get("process", "")).startswith(
        "observer")


def check(events, ops):
    granted = {op.token for op in ops
               if op.f == "acquire" and op.token and op.type in ("ok", "info")}
    last = {}
    violations = []
    seen = 0
    for ev in events:
        if not is_observation(ev):
            continue
        seen += 1
        key = (ev["process"], ev.get("lock"))
        pos = (ev.get("index", 0), ev.get("offset", 0))
        token = ev.get("token", 0) if ev.get("leader") else 0
        prev = last.get(key)
        if prev is not None:
            ppos, ptoken = prev
            if pos <= ppos:
                violations.append({"what": "a change at or before the previous one",
                                   "observer": ev["process"], "lock": ev.get("lock"),
                                   "position": list(pos), "previous": list(ppos),
                                   "time": ev["time"]})
            if token and ptoken and token < ptoken:
                violations.append({"what": "a leader token below an earlier leader's",
                                   "observer": ev["process"], "lock": ev.get("lock"),
                                   "token": token, "previous": ptoken,
                                   "time": ev["time"]})
        if token and granted and token not in granted:
            violations.append({"what": "a leader token no campaigner was granted",
                               "observer": ev["process"], "lock": ev.get("lock"),
                               "token": token, "time": ev["time"]})
        last[key] = (pos, token or (prev[1] if prev else 0))
    return {
        "valid": not violations,
        "observations": seen,
        "violations": violations[:MAX_REPORTED],
        "violation_count": len(violations),
    }
