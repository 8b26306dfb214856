#!/usr/bin/env python3
"""Reads raftlockd logs and prints one JSON line about snapshots: how many
were taken, how many of them had their image dumped off the loop (feature
level 6; the others stall the loop for their dump), how many were packed
(level 7), the largest snapshot, the state it holds and the time its dump
took, and the longest restore.

usage: snapshots.py NODE_LOG...
"""
import json
import re
import sys

# "... bytes in X ms" before feature level 6; "... bytes, dumped in X ms
# [off the loop]" from it.
# From level 7 a line of an image packed ends ", its image packed from N
# bytes": N is the state's size.
TAKEN = re.compile(r"snapshot at index (\d+): (\d+) bytes,? (?:dumped )?in ([0-9.]+) ms"
                   r"( off the loop)?(?:, its image packed from (\d+) bytes)?")
RESTORED = re.compile(r"restored snapshot at (\d+) \((\d+) bytes[;)].*? in ([0-9.]+) ms")


def main():
    taken, restored = [], []
    for path in sys.argv[1:]:
        try:
            with open(path, errors="replace") as f:
                for line in f:
                    m = TAKEN.search(line)
                    if m:
                        taken.append((int(m.group(1)), int(m.group(2)), float(m.group(3)),
                                      m.group(4) is not None,
                                      int(m.group(5)) if m.group(5) else None))
                    m = RESTORED.search(line)
                    if m:
                        restored.append((int(m.group(1)), int(m.group(2)), float(m.group(3))))
        except OSError:
            pass
    big = max(taken, key=lambda t: t[1]) if taken else None
    on_loop = [t[2] for t in taken if not t[3]]
    rest = max(restored, key=lambda t: t[2]) if restored else None
    print(json.dumps({
        "system": "raftlock", "workload": "snapshot", "clients": 0,
        "status": "ok" if taken else "failed",
        "snapshots": len(taken),
        "snapshots_off_loop": sum(1 for t in taken if t[3]),
        "longest_loop_stall_ms": max(on_loop) if on_loop else 0,
        "largest_snapshot_mib": round(big[1] / 2**20, 1) if big else None,
        "largest_snapshot_ms": big[2] if big else None,
        "largest_snapshot_state_mib": round((big[4] or big[1]) / 2**20, 1) if big else None,
        "snapshots_packed": sum(1 for t in taken if t[4] is not None),
        "longest_snapshot_ms": max(t[2] for t in taken) if taken else None,
        "restores": len(restored),
        "longest_restore_ms": rest[2] if rest else None,
        "longest_restore_mib": round(rest[1] / 2**20, 1) if rest else None,
    }, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
