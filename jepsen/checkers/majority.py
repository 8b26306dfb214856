"""When a majority of the cluster was healthy and connected.

A nemesis action leaves such a majority when the members it does not
touch are a majority and can all reach each other: a kill or pause of a
minority of nodes, a clock rate on a minority, a partition whose largest
side (a set of nodes that all reach each other) is a majority, a clock
jump (wall clock only: it must change nothing), anything done to a
worker (pause, kill, revocation). It leaves none when it stops every
node (restart-all, a clock rate on all), cuts the cluster so that no
majority reaches each other (ring: each node sees only its neighbours),
or changes the membership (the number of votes needed moves under it).
An action of an unknown kind counts as leaving none: it is excused,
never judged.

The harness runs one action at a time; each lasts from the moment it
began to act (`began`, else its start event) to its end event, which an
undo that restarts nodes logs once they serve again.

An action or undo that failed (a "fail" event) may have acted in part: a
node left dead, a link left cut, whose leftovers and the next actions
together may leave no majority, though each alone would. From when it
began (`began`, else the fail event) to the final heal's end, that is
counted as a span that leaves no majority (to the end of the history if
the final heal failed too): it can only excuse, and the run fails anyway
for the failure.
"""

from . import history as H


def leaves_majority(ev, nodes):
    """Whether the action of start event `ev`, in a cluster of `nodes`
    members, leaves a majority healthy and connected."""
    f = ev.get("f")
    majority = nodes // 2 + 1
    touched = {t for t in ev.get("targets") or [] if str(t).startswith("n")}
    if f in ("kill", "pause", "clock-rate"):
        return nodes - len(touched) >= majority
    if f == "partition":
        if ev.get("mode") not in ("isolate-leader", "isolate-random",
                                  "halves", "bridge"):
            return False  # ring, or a shape whose sides are not cliques
        return max((len(g) for g in ev.get("groups") or []),
                   default=0) >= majority
    return f in ("clock-jump", "worker-kill", "revoke")


def action_spans(events, nodes):
    """(began, end, leaves_majority) of every nemesis action, and of the
    unknown state after a failure (see above); end is INF for one never
    undone."""
    spans = []
    opened = None
    unknown = None  # when a failure began; the state is unknown since
    heal_failed = False
    for ev in H.nemesis_events(events):
        t = ev["time"]
        if ev["type"] == "start":
            if opened is not None:  # never two at once; be safe anyway
                spans.append((opened[0], t, opened[1]))
            opened = (ev.get("began", t), leaves_majority(ev, nodes))
        elif ev["type"] == "end":
            if opened is not None:
                spans.append((opened[0], t, opened[1]))
                opened = None
            if ev.get("f") == "final-heal" and unknown is not None \
                    and not heal_failed:
                spans.append((unknown, t, False))
                unknown = None
        elif ev["type"] == "fail" and ev.get("f") != "schedule":
            began = ev.get("began", t)
            if opened is not None:  # its undo failed
                spans.append((opened[0], began, opened[1]))
                opened = None
            unknown = began if unknown is None else unknown
            heal_failed = heal_failed or ev.get("f") == "heal"
    if opened is not None:
        spans.append((opened[0], H.INF, opened[1]))
    if unknown is not None:
        spans.append((unknown, H.INF, False))
    return spans


def healthy_windows(events, nodes):
    """The disjoint (start, end) stretches of the history in which no
    action that leaves no healthy majority was under way."""
    if not events:
        return []
    t0, t1 = events[0]["time"], events[-1]["time"]
    out = []
    cur = t0
    for began, end, ok in sorted(action_spans(events, nodes)):
        if ok:
            continue
        if began > cur:
            out.append((cur, min(began, t1)))
        cur = max(cur, end)
    if cur < t1:
        out.append((cur, t1))
    return [(a, b) for a, b in out if b > a]
