"""Checker 5: no lost read-modify-write update of the fenced counter.

Under each lock the holder reads the register's counter with its token,
then writes the value it read plus one with the same token; the register
accepts a token at least as high as any it has seen for that lock (reads
included) and logs every access. An update is lost when an accepted write
does not increment the value the register held just before it (the writer
read a value that another write had already replaced). The final counter
must also agree with the clients: at least the writes acknowledged to
them, at most those plus the ones whose outcome they do not know.
"""

from . import history as H

MAX_REPORTED = 20


def check(events, ops):
    violations = []
    value = {}
    accepted = {}
    for ev in H.register_events(events):
        if ev["type"] != "accept" or ev.get("f") != "write":
            continue
        lock = ev.get("lock")
        prev = ev.get("prev", value.get(lock, 0))
        new = ev.get("value")
        accepted[lock] = accepted.get(lock, 0) + 1
        if new != prev + 1:
            violations.append({
                "what": "lost update: an accepted write did not increment "
                        "the current value",
                "lock": lock, "prev": prev, "written": new,
                "token": ev.get("token"), "client": ev.get("client"),
                "time": ev["time"]})
        value[lock] = new

    acked = {}
    unknown = {}
    for op in ops:
        if op.f != "write":
            continue
        if op.type == "ok":
            acked[op.lock] = acked.get(op.lock, 0) + 1
        elif op.type == "info":
            unknown[op.lock] = unknown.get(op.lock, 0) + 1

    for lock in sorted(set(value) | set(acked), key=str):
        final = value.get(lock, 0)
        lo = acked.get(lock, 0)
        hi = lo + unknown.get(lock, 0)
        if not lo <= final <= hi:
            violations.append({
                "what": "final counter disagrees with acknowledged writes",
                "lock": lock, "final": final, "acknowledged": lo,
                "unknown": hi - lo})

    return {
        "valid": not violations,
        "locks": len(value),
        "increments_accepted": sum(accepted.values()),
        "increments_acknowledged": sum(acked.values()),
        "final": value,
        "violations": violations[:MAX_REPORTED],
        "violation_count": len(violations),
    }
