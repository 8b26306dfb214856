"""A read-write lock: many readers of a configuration at once, a writer
alone; a waiting writer holds back later readers.

    python3 rwlock.py
"""
import raftlock

with raftlock.Client.from_env() as client:
    with client.session(ttl=10) as reader_a, client.session(ttl=10) as reader_b, \
            client.session(ttl=10) as writer:
        with reader_a.read_lock("config/app", timeout=5) as a, \
                reader_b.read_lock("config/app", timeout=5) as b:
            print(f"two readers at once: tokens {a.token} and {b.token}")
            try:
                writer.write_lock("config/app").acquire(timeout=0)
            except raftlock.LockBusy:
                print("the writer waits for the readers")
        with writer.write_lock("config/app", timeout=5) as w:
            print(f"writer alone: token {w.token}")
