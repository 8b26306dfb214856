"""An exclusive lock: run a migration once, whoever else tries at the same
time waits (or gives up after the timeout).

    RAFTLOCK_ENDPOINTS=127.0.0.1:7101 python3 lock.py
"""
import raftlock

with raftlock.Client.from_env() as client:
    try:
        with client.lock("db/migrate", timeout=10) as token:
            # Pass the token to whatever the lock protects (see fencing.py).
            print(f"migrating with fencing token {token}")
    except raftlock.LockNotAcquired as e:
        print(f"someone else is migrating: {e}")
        raise SystemExit(1)
