"""waits: no acquire waits longer than it asked to, plus a bound.

raftlock_lock_acquire() and raftlock_multi_acquire() with a timeout return
within it plus min(request timeout, 1 s) (client/raftlock.h): a wait the
cluster can never grant (a deadlock) must end too, with ETIMEDOUT, or at
once with EDEADLK. Every acquire invocation that names its timeout_ms > 0
is checked: from invocation to completion (or to the end of the history,
for one never completed) takes at most timeout + bound. A worker the
nemesis stopped (SIGSTOP: a pause, or the clock-rate action that stops a
holder) cannot return meanwhile: its operations that overlap that action
are left out (counted in `excused`).
"""

from .history import INF

DEFAULT_BOUND_S = 3.0  # the library's 1 s, and scheduling on a busy machine


def _pauses(events):
    """Per worker ("w3"), the (start, end) of the nemesis actions that
    named it as a target (one action at a time: an end ends them)."""
    out = {}
    open_ = {}
    for ev in events:
        if ev.get("process") != "nemesis":
            continue
        named = (ev.get("targets") or []) + (ev.get("paused") or [])
        targets = [t for t in named if str(t).startswith("w")]
        if ev["type"] == "start":
            for t in targets:
                open_[t] = ev["time"]
        elif ev["type"] == "end":
            # The undo resumes the worker first (then may wait for nodes).
            resumed = ev.get("began", ev["time"])
            for t in list(open_):
                out.setdefault(t, []).append((open_.pop(t), resumed))
    for t, start in open_.items():
        out.setdefault(t, []).append((start, INF))
    return out


def check(events, ops, bound_s=DEFAULT_BOUND_S):
    end_of_history = events[-1]["time"] if events else 0
    pauses = _pauses(events)
    checked = excused = 0
    worst = 0.0
    violations = []
    seen = set()
    for op in ops:
        if op.f != "acquire" or not op.timeout_ms or op.timeout_ms <= 0:
            continue
        if (op.process, op.inv) in seen:
            continue  # one lock set: one wait
        seen.add((op.process, op.inv))
        end = op.cmp if op.cmp != INF else end_of_history
        if any(s < end and op.inv < e
               for s, e in pauses.get("w%s" % op.process, ())):
            excused += 1
            continue
        checked += 1
        over = (end - op.inv) / 1e9 - op.timeout_ms / 1000.0
        worst = max(worst, over)
        if over > bound_s:
            d = op.describe()
            d["what"] = "waited %.3f s past its timeout of %d ms" % (
                over, op.timeout_ms)
            d["timeout_ms"] = op.timeout_ms
            d["over_seconds"] = round(over, 3)
            violations.append(d)
    return {
        "valid": not violations,
        "checked": checked,
        "excused": excused,
        "bound_seconds": bound_s,
        "max_over_seconds": round(worst, 3),
        "violation_count": len(violations),
        "violations": violations[:20],
    }
