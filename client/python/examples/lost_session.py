"""Reacting to a lost session: a worker checks, before each step, that its
session is still valid, and a callback stops it when the session is lost
(the cluster expired it, or no keepalive got through within the grace
period). The callback runs on a library thread: keep it short.

    python3 lost_session.py
"""
import threading

import raftlock

stop = threading.Event()


def on_lost(session, error):
    print(f"session {session.id} lost: {error}")
    stop.set()


def on_event(session, event, error):
    if event == raftlock.SessionEvent.JEOPARDY:
        print("no keepalive acknowledged in time: pausing")


with raftlock.Client.from_env() as client:
    with client.session(ttl=5, on_lost=on_lost, on_event=on_event) as session:
        with session.lock("jobs/reindex", timeout=10) as lock:
            for step in range(5):
                if stop.is_set() or not session.valid:
                    print("stopping: the lock may be someone else's now")
                    break
                print(f"step {step} under token {lock.token}, "
                      f"valid for {session.valid_until_ms - raftlock.now_ms()} ms more")
                stop.wait(0.05)
