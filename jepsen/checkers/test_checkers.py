"""Each checker must pass the clean recorded history and catch the
violation planted in its own recorded history (testdata/)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from . import __main__ as main
from . import history
from . import majority

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata")
CHECKERS = ("fencing", "lease", "linearizable", "durability", "counter",
            "liveness", "observe")


def run(name, **kw):
    kw.setdefault("liveness_bound_s", 1.0)
    return main.run(history.load(os.path.join(DATA, name)), **kw)


class Clean(unittest.TestCase):
    def test_clean_history_passes_every_checker(self):
        for name in ("clean.jsonl", "durability_clean.jsonl",
                     "linear_busy_info.jsonl", "linear_busy_set_clean.jsonl",
                     "rwlock_clean.jsonl",
                     "reentrant_clean.jsonl", "waiters_clean.jsonl",
                     "election_clean.jsonl",
                     "liveness_stall_no_majority.jsonl"):
            res = run(name)
            for c in CHECKERS:
                self.assertTrue(res[c]["valid"], "%s %s: %s" % (
                    name, c, json.dumps(res[c]["violations"])))
            self.assertTrue(res["summary"]["valid"])

    def test_clean_figures(self):
        res = run("durability_clean.jsonl")
        self.assertEqual(res["fencing"]["grants"], 5)
        self.assertEqual(res["fencing"]["max_token"], 1004)
        self.assertEqual(res["counter"]["final"], {"a": 2})
        self.assertEqual(res["durability"]["reads_after_restart_all"], 1)
        self.assertEqual(res["durability"]["grants_checked"], 1)
        self.assertEqual(res["durability"]["releases_checked"], 2)
        self.assertEqual(res["durability"]["sessions_checked"], 4)
        self.assertAlmostEqual(res["liveness"]["max_seconds"], 0.03)
        self.assertEqual(res["liveness"]["interrupted"], 1)
        self.assertEqual(res["linearizable"]["busy_checked"], 1)


class Planted(unittest.TestCase):
    def caught(self, name, checker, what):
        res = run(name)
        self.assertFalse(res[checker]["valid"], name)
        self.assertFalse(res["summary"]["valid"])
        whats = [v["what"] for v in res[checker]["violations"]]
        self.assertTrue(any(what in w for w in whats),
                        "%s: %r not in %r" % (name, what, whats))
        return res

    def test_election_observer_out_of_order(self):
        self.caught("election_observe_order.jsonl", "observe",
                    "at or before the previous one")
        res = run("election_observe_order.jsonl")
        whats = [v["what"] for v in res["observe"]["violations"]]
        self.assertIn("a leader token below an earlier leader's", whats)

    def test_election_leader_never_granted(self):
        self.caught("election_unknown_token.jsonl", "observe",
                    "a leader token no campaigner was granted")

    def test_election_new_leader_with_the_previous_token(self):
        # w1 then w2 lead election E, both with token 5.
        self.caught("election_same_token.jsonl", "observe",
                    "a new leader with the token of the previous leader")
        # The same leader again with its token (a proclaim) is no change
        # of leader.
        evs = history.load(os.path.join(DATA, "election_same_token.jsonl"))
        for ev in evs:
            if ev.get("leader") == "w2":
                ev["leader"] = "w1"
        self.assertTrue(main.run(evs, liveness_bound_s=1.0)["observe"]
                        ["valid"])

    def test_election_leader_token_granted_on_another_lock(self):
        # Token 9 was granted on lock X, never on election E.
        self.caught("election_other_lock.jsonl", "observe",
                    "a leader token no campaigner was granted")

    def test_election_two_leaders(self):
        self.caught("election_two_leaders.jsonl", "lease",
                    "two holders of an exclusive lock overlap")

    def test_fencing_register_lower_token(self):
        self.caught("fencing_register.jsonl", "fencing", "lower token")

    def test_fencing_token_order(self):
        self.caught("fencing_order.jsonl", "fencing",
                    "not above an earlier acknowledged grant")

    def test_fencing_duplicate_token(self):
        self.caught("fencing_duplicate.jsonl", "fencing", "one token")

    def test_lease_overlap(self):
        res = self.caught("lease_overlap.jsonl", "lease", "exclusive lock")
        # The expiry of p1's session is invisible: only leases prove it.
        self.assertTrue(res["linearizable"]["valid"])

    def test_killed_worker_holds_nothing_after_its_death(self):
        # p1 was killed (worker-kill) before p2's grant: its lease ends
        # there, so the overlap is gone; a kill after p2's grant changes
        # nothing: the overlap is still a violation.
        path = os.path.join(DATA, "lease_overlap.jsonl")
        for at, valid in ((150000000, True), (300000000, False)):
            evs = history.load(path)
            evs.append({"time": at + 1000000, "at": at, "process": "nemesis",
                        "type": "start", "f": "worker-kill", "targets": ["w1"],
                        "mode": "holding"})
            evs.sort(key=lambda e: e["time"])
            res = main.run(evs, liveness_bound_s=1.0)
            self.assertEqual(res["lease"]["valid"], valid, json.dumps(
                res["lease"]["violations"]))

    def test_revoked_grant_ends_at_its_revocation(self):
        # An admin revoked p1's grant (token 1000) before p2's grant: the
        # overlap is gone; a revocation after p2's grant does not excuse it.
        path = os.path.join(DATA, "lease_overlap.jsonl")
        for at, valid in ((150000000, True), (300000000, False)):
            evs = history.load(path)
            evs.append({"time": at + 1000000, "at": at, "process": "nemesis",
                        "type": "start", "f": "revoke", "targets": ["w1"],
                        "lock": "a", "token": 1000, "revoked": True})
            evs.sort(key=lambda e: e["time"])
            res = main.run(evs, liveness_bound_s=1.0)
            self.assertEqual(res["lease"]["valid"], valid, json.dumps(
                res["lease"]["violations"]))

    def test_lease_semaphore(self):
        self.caught("lease_semaphore.jsonl", "lease", "more holders")

    def test_lease_overlap_under_drift_is_reported_not_hidden(self):
        evs = history.load(os.path.join(DATA, "lease_overlap.jsonl"))
        evs.append({"time": 0, "process": "nemesis", "type": "start",
                    "f": "clock-rate", "targets": ["n1"], "rate": 1.5,
                    "_line": 0})
        evs.append({"time": 1000, "process": "nemesis", "type": "end",
                    "f": "clock-rate", "targets": ["n1"], "_line": 0})
        evs.sort(key=lambda e: e["time"])
        res = main.run(evs, ttl_ms=3000, liveness_bound_s=1.0)
        self.assertTrue(res["lease"]["valid"])
        self.assertEqual(res["lease"]["drift_overlap_count"], 2)
        self.assertEqual(res["lease"]["drift_overlaps"][0]["clock_rate"], 1.5)
        # Within the tolerated rate it is a plain violation.
        evs[0]["rate"] = 1.005
        res = main.run(evs, ttl_ms=3000, liveness_bound_s=1.0)
        self.assertFalse(res["lease"]["valid"])

    def test_lease_overlap_under_a_slow_clock_is_not_excused(self):
        # A server clock at 0.5x or 0.9x only lengthens leases: the overlap
        # of p1 and p2 under it is a violation.
        for rate in (0.5, 0.9):
            evs = history.load(os.path.join(DATA, "lease_slow_clock.jsonl"))
            evs[0]["rate"] = rate
            res = main.run(evs, ttl_ms=3000, liveness_bound_s=1.0)
            self.assertFalse(res["lease"]["valid"], rate)
            self.assertEqual(res["lease"]["drift_overlap_count"], 0)
            self.assertEqual(res["summary"]["drift_windows"], [])
        # At 2x the same overlap is kept apart as caused by the drift.
        evs[0]["rate"] = 2.0
        res = main.run(evs, ttl_ms=3000, liveness_bound_s=1.0)
        self.assertTrue(res["lease"]["valid"])
        self.assertEqual(res["lease"]["drift_overlap_count"], 1)

    def test_lease_overlap_outside_the_fast_clock_window_is_kept(self):
        # A 2x window from 7.5 s to 7.6 s (+1 ms TTL) meets both holders'
        # intervals, but their overlap began at 3 s, before it.
        evs = history.load(os.path.join(DATA, "lease_slow_clock.jsonl"))
        evs[0].update(time=7500000000, rate=2.0)
        for ev in evs:
            if ev.get("f") == "clock-rate" and ev["type"] == "end":
                ev["time"] = 7600000000
        evs.sort(key=lambda e: e["time"])
        res = main.run(evs, ttl_ms=1, liveness_bound_s=1.0)
        self.assertFalse(res["lease"]["valid"])
        self.assertEqual(res["lease"]["drift_overlap_count"], 0)

    def test_release_through_an_empty_handle_acknowledged(self):
        # p1's acquire of L ended EUNKNOWN, p2 was granted L, then p1's
        # release of L through a fresh handle (no token) was acknowledged.
        self.caught("linear_foreign_release.jsonl", "linearizable",
                    "through a handle that holds nothing")
        # Refused with ENOTHOLDER, as it must be, it is clean.
        evs = history.load(os.path.join(DATA,
                                        "linear_foreign_release.jsonl"))
        evs[-1].update(type="fail", error="ENOTHOLDER")
        del evs[-1]["value"]
        res = main.run(evs, liveness_bound_s=1.0)
        self.assertTrue(res["linearizable"]["valid"], json.dumps(
            res["linearizable"]["violations"]))

    def test_linear_chain(self):
        res = self.caught("linear_chain.jsonl", "linearizable",
                          "cannot be linearized")
        self.assertTrue(res["lease"]["valid"])

    # A server that executes a retried acquire again (RAFTLOCK_BROKEN_DEDUP):
    # after its release was acknowledged, the lock stays held by a holder
    # nobody knows of. Each of three checkers sees it from its side.
    def test_dedup_ghost_starves_timed_waiters(self):
        self.caught("dedup_ghost.jsonl", "linearizable",
                    "refused as busy (ETIMEDOUT)")

    def test_dedup_ghost_is_unexplained_in_a_read(self):
        self.caught("dedup_ghost.jsonl", "durability",
                    "a holder the history cannot explain")

    def test_dedup_ghost_fails_per_lock_liveness(self):
        res = self.caught("dedup_ghost.jsonl", "liveness",
                          "a lock tried while a majority was healthy")
        self.assertEqual(res["liveness"]["locks_checked"], 3)
        # Grants on the other locks go on: only the per-lock rule sees it.
        self.assertEqual(res["liveness"]["violation_count"], 1)

    # The same ghost, but its session ends before the last fault heals:
    # after the final heal the lock flows again, so only the per-lock rule
    # over the whole healthy stretch sees the starvation before it.
    def test_dedup_ghost_freed_before_the_final_heal(self):
        res = self.caught("dedup_ghost_freed.jsonl", "liveness",
                          "a lock tried while a majority was healthy")
        self.assertEqual(res["liveness"]["violations"][0]["lock"], "a")

    # A worker killed while it holds a lock: its session lapses within the
    # TTL the bound allows, so its grant excuses no wait past its SIGKILL.
    # Here the lock is never handed on while another lock flows.
    def test_liveness_killed_holder_excuses_no_starvation(self):
        res = self.caught("liveness_killed_holder.jsonl", "liveness",
                          "a lock tried while a majority was healthy")
        self.assertEqual(res["liveness"]["violations"][0]["lock"], "a")
        self.assertGreater(res["liveness"]["per_lock_violations"], 0)

    def test_release_of_a_granted_handle_refused(self):
        evs = history.loads([
            {"f": "acquire", "lock": "a", "process": 1, "session": 1,
             "time": 1, "type": "invoke"},
            {"f": "acquire", "lock": "a", "process": 1, "session": 1,
             "time": 2, "type": "ok", "token": 7},
            {"f": "release", "lock": "a", "process": 1, "session": 1,
             "time": 3, "type": "invoke", "token": 7},
            {"f": "release", "lock": "a", "process": 1, "session": 1,
             "time": 4, "type": "fail", "error": "ENOTHOLDER", "token": 7}])
        res = main.run(evs, ttl_ms=3000, liveness_bound_s=1.0)
        whats = [v["what"] for v in res["linearizable"]["violations"]]
        self.assertTrue(any("refused as not holding" in w for w in whats),
                        whats)

    def set_history(self, intruder_token=None):
        """Process 1 takes the set {a, b} (tokens 7, 8) and releases it;
        with intruder_token, process 2 is granted b meanwhile."""
        lines = [
            {"f": "acquire", "lock": "a", "locks": ["a", "b"], "process": 1,
             "session": 1, "time": 10**9, "type": "invoke", "timeout_ms": 1000},
            {"f": "acquire", "lock": "a", "locks": ["a", "b"], "process": 1,
             "session": 1, "time": 2 * 10**9, "type": "ok", "token": 7,
             "tokens": [7, 8], "valid_until": 9 * 10**9},
            {"f": "release", "lock": "a", "locks": ["a", "b"], "process": 1,
             "session": 1, "time": 3 * 10**9, "type": "invoke", "token": 7,
             "tokens": [7, 8]},
            {"f": "release", "lock": "a", "locks": ["a", "b"], "process": 1,
             "session": 1, "time": 4 * 10**9, "type": "ok", "value": 0}]
        if intruder_token is not None:
            lines += [
                {"f": "acquire", "lock": "b", "process": 2, "session": 2,
                 "time": 2100000000, "type": "invoke"},
                {"f": "acquire", "lock": "b", "process": 2, "session": 2,
                 "time": 2200000000, "type": "ok", "token": intruder_token,
                 "valid_until": 9 * 10**9}]
        return history.loads(lines)

    def test_lock_set_is_one_operation_per_lock(self):
        ops = history.pair(self.set_history())
        grants = [(o.lock, o.token, o.type) for o in ops if o.f == "acquire"]
        self.assertEqual(grants, [("a", 7, "ok"), ("b", 8, "ok")])
        releases = [(o.lock, o.token) for o in ops if o.f == "release"]
        self.assertEqual(releases, [("a", 7), ("b", 8)])
        res = main.run(self.set_history(), ttl_ms=3000, liveness_bound_s=5.0)
        for c in ("fencing", "lease", "linearizable", "waits"):
            self.assertTrue(res[c]["valid"], c)

    def test_lock_set_overlap_is_caught(self):
        res = main.run(self.set_history(intruder_token=9), ttl_ms=3000,
                       liveness_bound_s=5.0)
        self.assertFalse(res["lease"]["valid"])
        self.assertFalse(res["linearizable"]["valid"])

    def waits_history(self, took_s, paused=False):
        lines = [
            {"f": "acquire", "lock": "a", "process": 1, "time": 10**9,
             "type": "invoke", "timeout_ms": 1000},
            {"f": "acquire", "lock": "a", "process": 1,
             "time": int((1 + took_s) * 10**9), "type": "fail",
             "error": "ETIMEDOUT"}]
        if paused:
            lines += [
                {"process": "nemesis", "f": "pause", "type": "start",
                 "targets": ["w1"], "time": 15 * 10**8},
                {"process": "nemesis", "f": "pause", "type": "end",
                 "time": 5 * 10**9}]
        return history.loads(lines)

    def test_waits_past_timeout_and_bound(self):
        from . import waits
        evs = self.waits_history(1.5)
        self.assertTrue(waits.check(evs, history.pair(evs))["valid"])
        evs = self.waits_history(5.0)
        res = waits.check(evs, history.pair(evs))
        self.assertFalse(res["valid"])
        self.assertIn("past its timeout", res["violations"][0]["what"])
        evs = self.waits_history(5.0, paused=True)
        res = waits.check(evs, history.pair(evs))
        self.assertTrue(res["valid"])
        self.assertEqual(res["excused"], 1)

    # An undo that restarts nodes logs its end once they serve; the worker
    # it stopped runs again, and the fast clock is gone, from when it began.
    def test_undo_resumes_and_stops_the_drift_when_it_began(self):
        from . import waits
        evs = [{"process": "nemesis", "f": "clock-rate", "type": "start",
                "targets": ["n1"], "paused": ["w1"], "rate": 2.0,
                "time": 10**9},
               {"process": "nemesis", "f": "clock-rate", "type": "end",
                "targets": ["n1"], "began": 2 * 10**9, "time": 5 * 10**9}]
        self.assertEqual(waits._pauses(evs), {"w1": [(10**9, 2 * 10**9)]})
        self.assertEqual(main.drift_windows(evs, 0.01, 3000),
                         [(10**9, 5 * 10**9, 2.0)])

    def test_timed_out_acquire_is_definite(self):
        ops = history.pair(history.loads([
            {"f": "acquire", "lock": "a", "process": 1, "time": 1,
             "type": "invoke"},
            {"f": "acquire", "lock": "a", "process": 1, "time": 2,
             "type": "info", "error": "ETIMEDOUT"},
            {"f": "release", "lock": "a", "process": 1, "time": 3,
             "type": "invoke"},
            {"f": "release", "lock": "a", "process": 1, "time": 4,
             "type": "fail", "error": "ETIMEDOUT"}]))
        self.assertEqual(ops[0].type, "fail")  # the header says so
        self.assertEqual(ops[1].type, "info")  # a release's is unknown

    def test_linear_busy(self):
        self.caught("linear_busy.jsonl", "linearizable", "busy")

    def test_linear_busy_set(self):
        # a set turned away while none of its locks could have been full
        res = self.caught("linear_busy_set.jsonl", "linearizable", "busy")
        v = res["linearizable"]["violations"][0]
        self.assertEqual(v["lock"], ["a", "b"])
        self.assertEqual(res["linearizable"]["busy_checked"], 1)

    def test_linear_semaphore_without_leases(self):
        res = self.caught("linear_semaphore.jsonl", "linearizable",
                          "more acknowledged holders")
        self.assertTrue(res["lease"]["valid"])

    def test_durability_lost_grant(self):
        self.caught("durability_grant.jsonl", "durability", "grant was lost")

    def test_durability_lost_release(self):
        self.caught("durability_release.jsonl", "durability",
                    "release was lost")

    def test_durability_lost_session(self):
        self.caught("durability_session.jsonl", "durability",
                    "session was lost")

    def test_durability_holder_matched_by_lock_token_and_session(self):
        # p1 holds A with token 100; the read shows token 100 on lock B,
        # of another session: A's grant is lost and B's holder unexplained.
        res = self.caught("durability_wrong_lock.jsonl", "durability",
                          "grant was lost")
        whats = [v["what"] for v in res["durability"]["violations"]]
        self.assertIn("a holder the history cannot explain: no acquire of "
                      "that session may have been granted this token", whats)
        # The right lock and token under another session: still lost.
        evs = history.load(os.path.join(DATA, "durability_wrong_lock.jsonl"))
        for ev in evs:
            if ev.get("f") == "holders" and ev["type"] == "ok":
                ev["value"]["locks"] = {"A": [{"token": 100, "session": 99}]}
        res = main.run(evs, liveness_bound_s=1.0)
        whats = [v["what"] for v in res["durability"]["violations"]]
        self.assertIn("an acknowledged grant was lost", whats)
        self.assertTrue(any("session is not that of the grant" in w
                            for w in whats), whats)
        # With its own session it is the clean case.
        for ev in evs:
            if ev.get("f") == "holders" and ev["type"] == "ok":
                ev["value"]["locks"] = {"A": [{"token": 100, "session": 11}]}
        res = main.run(evs, liveness_bound_s=1.0)
        self.assertTrue(res["durability"]["valid"], json.dumps(
            res["durability"]["violations"]))

    def with_drift(self, name, rate):
        evs = history.load(os.path.join(DATA, name))
        for t, typ in ((515 * 10**6, "start"), (525 * 10**6, "end")):
            evs.append({"time": t, "process": "nemesis", "type": typ,
                        "f": "clock-rate", "targets": ["n1"], "rate": rate,
                        "_line": 0})
        evs.sort(key=lambda e: e["time"])
        return main.run(evs, ttl_ms=1, liveness_bound_s=1.0)

    def test_durability_loss_proven_by_lease_under_drift_is_kept_apart(self):
        res = self.with_drift("durability_session.jsonl", 2.0)
        self.assertTrue(res["durability"]["valid"])
        self.assertEqual(len(res["durability"]["drift_cases"]), 1)
        res = self.with_drift("durability_session.jsonl", 1.001)
        self.assertFalse(res["durability"]["valid"])

    def test_durability_loss_proven_by_acknowledgement_is_never_excused(self):
        res = self.with_drift("durability_grant.jsonl", 2.0)
        self.assertFalse(res["durability"]["valid"])

    def test_counter_lost_update(self):
        self.caught("counter_lost.jsonl", "counter", "lost update")

    def test_liveness_stuck(self):
        res = self.caught("liveness_stuck.jsonl", "liveness", "bound")
        self.assertAlmostEqual(res["liveness"]["max_seconds"], 2.6)

    # Every acquire hangs for 2.3 s (bound 1 s) while faults come and go,
    # each leaving a majority healthy and connected: each heal is followed
    # by the next fault within the bound ("interrupted"), so only the
    # progress rule can see it.
    def test_liveness_stall_while_a_majority_is_healthy(self):
        res = self.caught("liveness_stall_majority.jsonl", "liveness",
                          "while a majority was healthy and connected")
        self.assertEqual(res["liveness"]["violation_count"], 1)
        self.assertEqual(res["liveness"]["interrupted"], 3)
        self.assertAlmostEqual(
            res["liveness"]["max_healthy_gap_seconds"], 2.41)

    # Its twin: the same stall while no majority was healthy (restart-all,
    # a membership change, a ring partition, a clock rate on every node).
    # A fault counts from when it began: the membership change's start
    # event comes 1.15 s after it began to act.
    def test_liveness_fault_counts_from_when_it_began(self):
        evs = history.load(os.path.join(
            DATA, "liveness_stall_no_majority.jsonl"))
        self.assertTrue(main.run(evs, liveness_bound_s=1.0)["liveness"]
                        ["valid"])
        for ev in evs:
            if ev.get("f") == "membership":
                ev.pop("began", None)
        res = main.run(evs, liveness_bound_s=1.0)["liveness"]
        self.assertFalse(res["valid"])

    # The same stall, but the kill's undo (restarting n1) failed: n1 may
    # still be down when n2 is killed, so no majority is known healthy from
    # when that undo began to the final heal. The stretch before it is
    # still judged.
    def test_failed_undo_leaves_no_known_majority_to_the_final_heal(self):
        evs = self.stall_with(lambda ev: ev.get("f") == "kill" and
                              ev["type"] == "end",
                              {"type": "fail", "began": 1250000000,
                               "error": "undo: n1 not serving"})
        self.assertEqual(majority.healthy_windows(evs, 3),
                         [(6000000, 1250000000), (4000000000, 4630000000)])
        self.assertTrue(main.run(evs, liveness_bound_s=1.0)["liveness"]
                        ["valid"])

    # An action that failed part-way logged no start, only its fail with
    # when it began: what it did counts from then to the final heal.
    def test_failed_action_counts_from_when_it_began(self):
        evs = self.stall_with(lambda ev: ev.get("f") == "kill",
                              {"type": "fail", "began": 1050000000,
                               "error": "n3 survived SIGKILL"})
        self.assertEqual(majority.healthy_windows(evs, 3),
                         [(6000000, 1050000000), (4000000000, 4630000000)])
        # A final heal that failed too heals nothing; a failure of the
        # schedule (after the final heal) acted on nothing.
        evs.append({"time": 4700000000, "process": "nemesis", "type": "fail",
                    "f": "schedule", "error": "no nemesis acted"})
        self.assertEqual(majority.healthy_windows(evs, 3)[-1],
                         (4000000000, 4700000000))
        k = next(k for k, ev in enumerate(evs)
                 if ev.get("f") == "final-heal")
        evs.insert(k, {"time": 3990000000, "process": "nemesis",
                       "type": "fail", "f": "heal", "began": 3900000000,
                       "error": "iptables -F"})
        self.assertEqual(majority.healthy_windows(evs, 3),
                         [(6000000, 1050000000)])

    # A heal counts from when its undo began, not from its end event (a
    # restarted node's comes once it serves again): the clock rate's undo
    # began 0.15 s before its end, the first grant came 0.22 s after it.
    def test_heal_counts_from_when_its_undo_began(self):
        evs = history.load(os.path.join(
            DATA, "liveness_stall_majority.jsonl"))
        for ev in evs:
            if ev.get("f") == "clock-rate" and ev["type"] == "end":
                ev["began"] = ev["time"] - 150000000
        res = main.run(evs, liveness_bound_s=1.0)["liveness"]
        self.assertAlmostEqual(res["max_seconds"], 0.37)

    def stall_with(self, which, fields):
        """liveness_stall_majority.jsonl with its events `which` replaced:
        the first by an event with `fields` (same time and f), the others
        dropped."""
        evs = []
        for ev in history.load(os.path.join(
                DATA, "liveness_stall_majority.jsonl")):
            if not which(ev):
                evs.append(ev)
            elif fields is not None:
                evs.append({"time": ev["time"], "process": "nemesis",
                            "f": ev["f"], **fields})
                fields = None
        return evs

    def test_which_faults_leave_a_majority(self):
        def leaves(nodes, **ev):
            return majority.leaves_majority(ev, nodes)
        self.assertTrue(leaves(3, f="kill", targets=["n1"]))
        self.assertFalse(leaves(3, f="kill", targets=["n1", "n2"]))
        self.assertTrue(leaves(5, f="kill", targets=["n1", "n2"]))
        self.assertTrue(leaves(3, f="pause", targets=["w2"]))
        self.assertFalse(leaves(3, f="restart-all", targets=["n1"]))
        self.assertTrue(leaves(5, f="partition", mode="halves",
                               groups=[["n1", "n2"], ["n3", "n4", "n5"]]))
        self.assertTrue(leaves(5, f="partition", mode="bridge",
                               groups=[["n1", "n2", "n3"],
                                       ["n3", "n4", "n5"]]))
        self.assertFalse(leaves(5, f="partition", mode="ring",
                                groups=[["n5", "n1", "n2"]]))
        self.assertFalse(leaves(3, f="clock-rate", mode="rate-all",
                                targets=["n1", "n2", "n3"]))
        self.assertTrue(leaves(3, f="clock-jump", targets=["n1", "n2"]))
        self.assertFalse(leaves(3, f="membership", targets=["n1"]))
        self.assertFalse(leaves(3, f="something-new", targets=[]))

    def test_rwlock_writer_overlaps_readers(self):
        self.caught("rwlock_overlap.jsonl", "lease", "writer overlaps")
        self.caught("rwlock_overlap.jsonl", "linearizable",
                    "more acknowledged holders")

    def test_reentrant_token_changed(self):
        self.caught("reentrant_token.jsonl", "fencing", "another token")

    def test_reentrant_depth(self):
        self.caught("reentrant_depth.jsonl", "linearizable", "wrong depth")

    def test_failed_nemesis_fails_the_run(self):
        evs = history.load(os.path.join(DATA, "clean.jsonl"))
        evs.append({"time": 10**12, "process": "nemesis", "type": "fail",
                    "f": "partition", "error": "iptables missing",
                    "_line": 0})
        res = main.run(evs, liveness_bound_s=1.0)
        self.assertFalse(res["summary"]["valid"])


    def test_node_crash_fails_the_run(self):
        evs = history.load(os.path.join(DATA, "clean.jsonl"))
        evs.append({"time": 10**12, "process": "nemesis", "type": "info",
                    "f": "node-crash", "node": "n2", "returncode": -6,
                    "_line": 0})
        res = main.run(evs, liveness_bound_s=1.0)
        self.assertFalse(res["summary"]["valid"])
        self.assertEqual(res["summary"]["node_crashes"][0]["node"], "n2")


class History(unittest.TestCase):
    def test_unknown_error_is_info(self):
        ops = history.pair(history.loads([
            '{"time":1,"process":1,"type":"invoke","f":"acquire","lock":"a"}',
            '{"time":2,"process":1,"type":"fail","f":"acquire","lock":"a",'
            '"error":"ECONNECTION"}']))
        self.assertEqual(ops[0].type, "info")

    def test_pending_is_info(self):
        ops = history.pair(history.loads([
            '{"time":1,"process":1,"type":"invoke","f":"acquire","lock":"a"}'
        ]))
        self.assertEqual(ops[0].type, "info")
        self.assertEqual(ops[0].cmp, history.INF)

    def test_double_invoke_is_an_error(self):
        with self.assertRaises(ValueError):
            history.pair(history.loads([
                '{"time":1,"process":1,"type":"invoke","f":"acquire"}',
                '{"time":2,"process":1,"type":"invoke","f":"acquire"}']))


class CommandLine(unittest.TestCase):
    def test_exit_status_and_results_file(self):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "results.json")
            for name, want in (("clean.jsonl", 0), ("lease_overlap.jsonl", 1)):
                p = subprocess.run(
                    [sys.executable, "-m", "checkers",
                     os.path.join(DATA, name), "--out", out,
                     "--liveness-bound-s", "1"],
                    cwd=here, capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, want, p.stdout + p.stderr)
                with open(out) as f:
                    self.assertEqual(json.load(f)["summary"]["valid"],
                                     want == 0)


if __name__ == "__main__":
    unittest.main()
