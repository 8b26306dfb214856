"""A semaphore: at most 2 of 4 workers run at the same time (every user of
the name gives the same limit).

    python3 semaphore.py
"""
import threading
import time

import raftlock

LIMIT = 2
running, most = 0, 0
mu = threading.Lock()


def worker(client, n):
    global running, most
    with client.session(ttl=10) as session:
        with session.semaphore("jobs/encoder", LIMIT, timeout=30) as permit:
            with mu:
                running += 1
                most = max(most, running)
            print(f"worker {n} runs with token {permit.token}")
            time.sleep(0.1)
            with mu:
                running -= 1


with raftlock.Client.from_env() as client:
    threads = [threading.Thread(target=worker, args=(client, n)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
print(f"at most {most} ran at once (limit {LIMIT})")
assert most <= LIMIT
