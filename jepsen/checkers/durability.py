"""Checker 4: durability of acknowledged grants, releases and sessions.

Reads of the whole lock table ("holders" operations, linearizable) are
compared with what clients were told before them:
  - a grant acknowledged before the read was invoked, not released before
    the read completed, whose session was alive during the read, must be
    among the holders under its lock and token, with its session. The
    session is proven alive by an acknowledged operation of that session
    invoked after the read (assumption-free; sessions never revive), or by
    a lease validity the holder reported that reaches past the read (holds
    under the clock-rate bound);
  - a release acknowledged before the read was invoked: its lock and token
    must not be among the holders;
  - every holder the read shows is explained by the history: its lock and
    token are those of an acknowledged grant of its session, or the
    holder's session had an acquire of that lock whose outcome is unknown,
    invoked before the read ended (a server that executes a retried
    acquire again shows up here);
  - a session opened before the read, not closed before it completed, and
    proven alive as above, must be among the read's sessions.
The reads that follow a restart-all nemesis are what make this the check
that no acknowledged state was lost to kill -9 of every node.
"""

import heapq

from . import history as H

MAX_REPORTED = 20


def same_session(granted, shown):
    """A session the history does not name matches any."""
    return granted is None or shown is None or granted == shown


def check(events, ops, drift_windows=None):
    reads = [op for op in ops if op.f == "holders" and op.type == "ok"
             and isinstance(op.value, dict)]
    validity = H.session_validity(events)
    grants = H.grants_with_releases(ops)
    revoked = H.revoked_at(events)

    # Per session: the latest invocation of an acknowledged operation that
    # needs a live session, and the latest lease validity reported.
    acked = {}
    opened = []
    closes = {}
    for op in ops:
        if op.session is None:
            continue
        # A close is no proof: the library may answer a close of a session
        # it already knows lost without asking the server.
        if op.type == "ok" and op.f in ("acquire", "release"):
            acked[op.session] = max(acked.get(op.session, op.inv), op.inv)
        if op.f == "open" and op.type == "ok":
            opened.append(op)
        if op.f == "close":
            closes[op.session] = min(closes.get(op.session, op.inv), op.inv)
    lease_max = {k: max(v for _, v in samples)
                 for k, samples in validity.items()}

    def alive_through(process, session, t):
        """(proven, how) that the session was alive at time t."""
        if acked.get(session, -H.INF) > t:
            return True, "acknowledged later"
        if lease_max.get((process, session), -H.INF) > t:
            return True, "lease"
        return False, None

    def in_drift(rd):
        # The lease proof is about the read's whole window.
        return any(ws <= rd.cmp and rd.inv <= we
                   for ws, we, _ in drift_windows or [])

    violations = []
    drift = []

    def record(v, how, rd):
        # A loss proven only by a lease, while a clock ran beyond the bound,
        # is reported apart; a loss proven by an acknowledgement never is.
        (drift if how == "lease" and in_drift(rd) else violations).append(v)

    checked_grants = checked_tokens = checked_sessions = 0
    restarts = [ev["time"] for ev in H.nemesis_events(events)
                if ev.get("f") == "restart-all" and ev["type"] == "end"]
    after_restart = 0

    # Tokens are per lock in what a read shows: a holder is matched by
    # (lock, token), never by its token alone.
    by_token = {(g.lock, g.token): (g, r) for g, r in grants}
    unknown = {}  # (lock, session) -> acquires whose outcome is unknown
    for op in ops:
        if op.f == "acquire" and op.type == "info":
            unknown.setdefault((op.lock, op.session), []).append(op)
    # Grants in order of acknowledgement; a read considers those
    # acknowledged before it and not yet let go (release invoked).
    pending = sorted(grants, key=lambda gr: gr[0].cmp)
    nxt = 0
    active = []  # heap of (release invocation or INF, seq, grant, release)
    seq = 0
    reads.sort(key=lambda op: op.inv)
    for rd in reads:
        while nxt < len(pending) and pending[nxt][0].cmp < rd.inv:
            g, r = pending[nxt]
            stop = r.inv if r is not None else H.INF
            stop = min(stop, revoked.get((g.lock, g.token), H.INF))
            heapq.heappush(active, (stop, seq, g, r))
            seq += 1
            nxt += 1
        while active and active[0][0] <= rd.inv:
            heapq.heappop(active)
        held = {}  # (lock, token) -> holder's session
        for lock, hs in (rd.value.get("locks") or {}).items():
            for h in hs:
                held[(lock, h.get("token"))] = h.get("session")
        sessions = set(rd.value.get("sessions") or [])
        complete_sessions = rd.value.get("sessions") is not None
        if any(t < rd.inv for t in restarts):
            after_restart += 1

        for (lock, tok), sess in held.items():
            checked_tokens += 1
            gr = by_token.get((lock, tok))
            if gr is None:
                # No acknowledged grant has this token: only an acquire of
                # that lock and session whose outcome is unknown, invoked
                # before the read ended, can explain it.
                if not any(a.inv < rd.cmp for a in unknown.get((lock, sess),
                                                               ())):
                    violations.append({
                        "what": "a holder the history cannot explain: no "
                                "acquire of that session may have been "
                                "granted this token",
                        "lock": lock, "token": tok, "session": sess,
                        "read": rd.describe()})
                continue
            g, r = gr
            if not same_session(g.session, sess):
                violations.append({
                    "what": "a holder whose session is not that of the "
                            "grant with its lock and token",
                    "grant": g.describe(), "holder_session": sess,
                    "read": rd.describe()})
            if r is not None and r.type == "ok" and r.cmp < rd.inv:
                violations.append({
                    "what": "an acknowledged release was lost: the "
                            "token is held again",
                    "grant": g.describe(), "release": r.describe(),
                    "read": rd.describe()})

        for stop, _, g, r in active:
            if stop <= rd.cmp:
                continue  # released while the read ran, or unknown
            ok, how = alive_through(g.process, g.session, rd.cmp)
            if not ok:
                continue
            checked_grants += 1
            key = (g.lock, g.token)
            if key not in held or not same_session(g.session, held[key]):
                record({"what": "an acknowledged grant was lost",
                        "grant": g.describe(), "read": rd.describe(),
                        "proof": how}, how, rd)

        if not complete_sessions:
            continue
        for o in opened:
            if o.cmp >= rd.inv:
                continue
            if closes.get(o.session, H.INF) <= rd.cmp:
                continue
            ok, how = alive_through(o.process, o.session, rd.cmp)
            if not ok:
                continue
            checked_sessions += 1
            if o.session not in sessions:
                record({"what": "an acknowledged session was lost",
                        "session": o.session, "open": o.describe(),
                        "read": rd.describe(), "proof": how}, how, rd)

    last_read = max((rd.inv for rd in reads), default=-H.INF)
    releases_covered = sum(1 for g, r in grants if r is not None and
                           r.type == "ok" and r.cmp < last_read)

    return {
        "valid": not violations,
        "reads": len(reads),
        "reads_after_restart_all": after_restart,
        "restart_all": len(restarts),
        "grants_checked": checked_grants,
        "releases_checked": releases_covered,
        "held_tokens_checked": checked_tokens,
        "sessions_checked": checked_sessions,
        "violations": violations[:MAX_REPORTED],
        "violation_count": len(violations),
        "drift_cases": drift[:MAX_REPORTED],
    }
