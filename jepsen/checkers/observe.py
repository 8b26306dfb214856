"""Checker 7: elections seen by observers (docs/GUARANTEES.md rule 20).

Observers (process "observer-N", type "observe") log each change of an
election's (leader, value, token) that raftlock_observe() reports, with
its log position (index, offset) and whether the history was read again
(lost). Per observer and election:
  - positions strictly increase (changes in log order, none twice);
  - a new leader (another session) has a higher token than the previous
    leader; only the same leader keeps its token (a proclaim);
  - every leader token seen is one some campaigner of that election was
    granted, or may have been: per election, the tokens seen that no
    acknowledged acquire of it returned are at most its acquires whose
    outcome is unknown (info: the worker never learned their token).
That no two campaigners believed they led with valid leases at once is the
lease checker's, on the campaigners' acquire/release operations.
"""

MAX_REPORTED = 20


def is_observation(ev):
    return ev.get("type") == "observe" and str(ev.get("process", "")).startswith(
        "observer")


def leader_of(ev):
    """Who leads in an observation: its session, else a leader named
    instead of true; None when the observation does not say."""
    if ev.get("session") is not None:
        return ev["session"]
    leader = ev.get("leader")
    return None if isinstance(leader, bool) else leader


def check(events, ops):
    # A token is a grant of one election: one granted on another lock
    # explains nothing.
    granted = {(op.lock, op.token) for op in ops
               if op.f == "acquire" and op.token and op.type == "ok"}
    unknown = {}
    for op in ops:
        if op.f == "acquire" and op.type == "info":
            unknown[op.lock] = unknown.get(op.lock, 0) + 1
    unexplained = {}
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
        who = leader_of(ev) if token else None
        prev = last.get(key)
        if prev is not None:
            ppos, ptoken, pwho = prev
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
            elif token and token == ptoken and who is not None and \
                    pwho is not None and who != pwho:
                violations.append({"what": "a new leader with the token of "
                                           "the previous leader",
                                   "observer": ev["process"], "lock": ev.get("lock"),
                                   "token": token, "leader": who,
                                   "previous_leader": pwho,
                                   "time": ev["time"]})
        if token and (ev.get("lock"), token) not in granted:
            unexplained.setdefault(ev.get("lock"), set()).add(token)
        if token:
            last[key] = (pos, token, who)
        else:
            last[key] = (pos,) + (prev[1:] if prev else (0, None))
    for lock, tokens in unexplained.items():
        if len(tokens) > unknown.get(lock, 0):
            violations.append({"what": "a leader token no campaigner was granted",
                               "lock": lock, "tokens": sorted(tokens),
                               "unknown_acquires": unknown.get(lock, 0)})
    return {
        "valid": not violations,
        "observations": seen,
        "tokens_of_unknown_acquires": sum(len(t) for t in unexplained.values()),
        "violations": violations[:MAX_REPORTED],
        "violation_count": len(violations),
    }
