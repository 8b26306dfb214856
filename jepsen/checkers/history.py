"""Reading a history and pairing invocations with their completions.

The format is described in jepsen/README.md. Every line is one JSON object
with at least "time" (CLOCK_MONOTONIC nanoseconds), "process" and "type".
Client processes are integers and have at most one operation outstanding;
"register" and "nemesis" are the fenced register and the fault injector.
"""

import bisect
import json

INF = float("inf")

# Errors after which an operation certainly did not take effect.
DEFINITE_ERRORS = {
    "EBUSY", "ESESSION", "ENOTHOLDER", "EKIND", "ELIMIT", "EINVAL",
    "ETOOBIG", "ENOTFOUND", "ESTALESEQ", "REFUSED", "EDEADLK",
}

# Errors that the header makes definite for one operation only: an acquire
# that returns ETIMEDOUT neither holds nor waits (raftlock_lock_acquire(),
# GUARANTEES rule 6), whatever the worker wrote.
DEFINITE_ERRORS_OF = {"acquire": {"ETIMEDOUT"}}


def load(path):
    """Returns the events of a history file, sorted by time (stable)."""
    events = []
    with open(path, "r", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError as e:
                raise ValueError("%s:%d: not JSON: %s" % (path, lineno, e))
            if "time" not in ev or "process" not in ev or "type" not in ev:
                raise ValueError("%s:%d: needs time, process and type" %
                                 (path, lineno))
            ev["_line"] = lineno
            events.append(ev)
    events.sort(key=lambda e: e["time"])
    return events


def loads(lines):
    """Like load() for a list of dicts or JSON strings (tests)."""
    events = []
    for i, line in enumerate(lines, 1):
        ev = json.loads(line) if isinstance(line, str) else dict(line)
        ev["_line"] = i
        events.append(ev)
    events.sort(key=lambda e: e["time"])
    return events


def is_client(ev):
    return isinstance(ev.get("process"), int)


class Op:
    """One client operation: its invocation and completion."""

    __slots__ = ("process", "f", "lock", "inv", "cmp", "type", "token",
                 "value", "error", "session", "kind", "limit", "index",
                 "valid_until", "mode", "timeout_ms", "part", "set_parts")

    def __init__(self, inv, index):
        self.process = inv["process"]
        self.f = inv.get("f")
        self.lock = inv.get("lock")
        self.inv = inv["time"]
        self.cmp = INF
        self.type = "info"  # until a completion says otherwise
        self.token = inv.get("token")
        self.value = inv.get("value")
        self.error = None
        self.session = inv.get("session")
        self.kind = inv.get("kind")
        self.limit = inv.get("limit")
        self.mode = inv.get("mode") or "exclusive"
        self.index = index
        self.valid_until = None
        self.timeout_ms = inv.get("timeout_ms")
        self.part = None  # a lock set's operation: this lock's position
        self.set_parts = None  # and the set's operations, one per lock

    def complete(self, ev):
        self.cmp = ev["time"]
        self.type = ev["type"]
        self.error = ev.get("error")
        if ev.get("token") is not None:
            self.token = ev["token"]
        if self.part is not None and ev.get("tokens"):
            self.token = ev["tokens"][self.part]
        if "value" in ev:
            self.value = ev["value"]
        if ev.get("session") is not None:
            self.session = ev["session"]
        self.valid_until = ev.get("valid_until") or None
        # An error that does not say the operation failed for certain leaves
        # its outcome unknown, whatever the worker wrote.
        if self.type == "fail" and self.error and \
                self.error not in DEFINITE_ERRORS and \
                self.error not in DEFINITE_ERRORS_OF.get(self.f, ()):
            self.type = "info"
        elif self.type == "info" and \
                self.error in DEFINITE_ERRORS_OF.get(self.f, ()):
            self.type = "fail"

    def __repr__(self):
        return "Op(p=%s %s %s %s tok=%s [%s,%s] err=%s)" % (
            self.process, self.f, self.lock, self.type, self.token,
            self.inv, self.cmp, self.error)

    def describe(self):
        return {
            "process": self.process, "f": self.f, "lock": self.lock,
            "type": self.type, "token": self.token, "invoke": self.inv,
            "complete": None if self.cmp == INF else self.cmp,
            "error": self.error, "session": self.session,
        }


def pair(events):
    """Returns the client operations in invocation order.

    A completion without an open invocation is an error in the history.
    Invocations never completed stay "info" with cmp = INF. An operation
    on a lock set ("locks": its names, "tokens": theirs) is one operation
    per lock, each with the set's times: the set is granted, or released,
    in one step.
    """
    ops = []
    open_ops = {}
    for ev in events:
        if not is_client(ev):
            continue
        p = ev["process"]
        t = ev["type"]
        if t == "invoke":
            if p in open_ops:
                raise ValueError("line %d: process %s invokes while an "
                                 "operation is open" % (ev["_line"], p))
            parts = []
            for i, name in enumerate(ev.get("locks") or [None]):
                op = Op(ev, len(ops))
                if name is not None:
                    op.lock, op.part = name, i
                    if ev.get("tokens"):
                        op.token = ev["tokens"][i]
                ops.append(op)
                parts.append(op)
            if len(parts) > 1:
                for op in parts:
                    op.set_parts = parts
            open_ops[p] = parts
        elif t in ("ok", "fail", "info"):
            parts = open_ops.pop(p, None)
            if parts is None:
                raise ValueError("line %d: completion of process %s without "
                                 "an invocation" % (ev["_line"], p))
            if parts[0].f != ev.get("f", parts[0].f):
                raise ValueError("line %d: completion %s of an invocation %s"
                                 % (ev["_line"], ev.get("f"), parts[0].f))
            for op in parts:
                op.complete(ev)
        elif t == "note":
            # Observations that are no operation (valid_until samples).
            continue
        else:
            raise ValueError("line %d: unknown type %r" % (ev["_line"], t))
    return ops


def killed_at(events):
    """Maps each worker the worker-kill nemesis killed to the moment just
    before its SIGKILL: it acts on nothing after that, whatever lease it
    reported."""
    out = {}
    for ev in events:
        if ev.get("process") == "nemesis" and ev.get("f") == "worker-kill" \
                and ev.get("type") == "start":
            for t in ev.get("targets") or []:
                if t.startswith("w") and t[1:].isdigit():
                    out.setdefault(int(t[1:]), ev.get("at", ev["time"]))
    return out


def revoked_at(events):
    """Maps (lock, token) of each grant the revoke nemesis revoked to the
    moment just before it asked: the grant ends there for the checkers
    (its holder may still believe in its lease; fencing protects)."""
    out = {}
    for ev in events:
        if ev.get("process") == "nemesis" and ev.get("f") == "revoke" \
                and ev.get("type") == "start" and ev.get("revoked"):
            out.setdefault((ev.get("lock"), ev.get("token")),
                           ev.get("at", ev["time"]))
    return out


def session_validity(events):
    """Maps (process, session) to the sorted list of (time, valid_until)
    samples the process reported, valid_until > 0 only; a killed worker's
    validity ends at its death (killed_at)."""
    killed = killed_at(events)
    out = {}
    for ev in events:
        if not is_client(ev):
            continue
        v = ev.get("valid_until")
        s = ev.get("session")
        if v and s is not None and ev["type"] != "invoke":
            v = min(v, killed.get(ev["process"], INF))
            out.setdefault((ev["process"], s), []).append((ev["time"], v))
    return out


def grants_with_releases(ops):
    """Pairs every ok acquire with the release that followed it.

    The worker makes one lock handle per acquire, so the release of a grant
    is the next release by the same process on the same lock, if it comes
    before that process's next acquire of the lock. Returns a list of
    (grant op, release op or None).
    """
    out = []
    pending = {}
    for op in ops:
        if op.f == "acquire":
            key = (op.process, op.lock)
            pending.pop(key, None)
            if op.type == "ok":
                entry = [op, None]
                out.append(entry)
                pending[key] = entry
        elif op.f == "release":
            entry = pending.pop((op.process, op.lock), None)
            if entry is not None:
                entry[1] = op
    return [(g, r) for g, r in out]


def possibly_held(ops, grants, lock):
    """Windows in which someone may have held `lock`: (start, end, process).

    `grants` are the (grant, release) pairs of that lock. A grant may hold
    from its acquire's invocation to its release's acknowledgement (or its
    refusal as not held), else until its session is closed (the session
    may have expired at any point before), else forever. An acquire whose outcome is unknown may
    hold from its invocation until the library has settled it in the
    background (ORPHAN_SETTLE_NS after its session is served again).
    """
    wins = []
    closed = _session_ends(ops)
    for g, r in grants:
        if r is not None and (r.type == "ok" or r.error == "ENOTHOLDER"):
            end = r.cmp  # released, or certainly not held any more
        else:
            end = closed.get(g.session, INF)  # until its session ends
        wins.append((g.inv, end, g.process))
    served = None
    for op in ops:
        if op.f == "acquire" and op.lock == lock and op.type == "info":
            if served is None:
                served = _served_times(ops)
            end = min(_orphan_end(served, op), closed.get(op.session, INF))
            wins.append((op.inv, end, op.process))
    return wins


def _session_ends(ops):
    """Per session, when an acknowledged close of it completed: nothing of
    that session is held after."""
    out = {}
    for op in ops:
        if op.f == "close" and op.type == "ok" and op.session is not None:
            out[op.session] = min(out.get(op.session, INF), op.cmp)
    return out


# An acquire that ended in EUNKNOWN goes on in the library as an orphan:
# its wait is cancelled, or its late grant released, in the background
# (raftlock_lock_acquire()), retried with a back-off of at most 1 s. Once
# the cluster serves that session again, the orphan settles within this
# (back-off, a release's round trip, one more failover on the way).
ORPHAN_SETTLE_NS = 10 * 10**9

# Operations whose acknowledgement shows the cluster served their session.
SERVED = ("acquire", "release", "reacquire", "rerelease", "holders")


def _served_times(ops):
    """Per session, the sorted (invocation, completion) of its ok
    operations that went through the cluster."""
    out = {}
    for op in ops:
        if op.type == "ok" and op.f in SERVED and op.session is not None:
            out.setdefault(op.session, []).append((op.inv, op.cmp))
    for v in out.values():
        v.sort()
    return out


def _orphan_end(served, op):
    """When an acquire of unknown outcome stops holding at the latest: the
    settle time after the first operation of its session invoked after it
    ended that the cluster acknowledged; never, if there is none."""
    times = served.get(op.session, ())
    i = bisect.bisect_right(times, (op.cmp, INF))
    if i == len(times):
        return INF
    return times[i][1] + ORPHAN_SETTLE_NS


def lock_kinds(ops):
    """Maps lock name to (kind, limit) from the acquire invocations."""
    kinds = {}
    for op in ops:
        if op.f == "acquire" and op.lock is not None:
            kind = op.kind or "mutex"
            limit = op.limit or 1
            if kind != "semaphore":
                limit = 1  # rwlock: one writer, or any number of readers
            kinds.setdefault(op.lock, (kind, limit))
    return kinds


def nemesis_events(events):
    return [ev for ev in events if ev.get("process") == "nemesis"]


def register_events(events):
    return [ev for ev in events if ev.get("process") == "register"]
