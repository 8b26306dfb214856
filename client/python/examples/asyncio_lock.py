"""asyncio: 20 coroutines take turns on one lock. Each waits in the
cluster's queue; the grant is pushed and handed to the event loop, with no
thread per waiter.

    python3 asyncio_lock.py
"""
import asyncio

import raftlock


async def job(session, n, order):
    async with session.lock_async("jobs/nightly", timeout=30) as lock:
        order.append(lock.token)
        await asyncio.sleep(0.01)  # the work, while holding the lock


async def main():
    with raftlock.Client.from_env() as client, client.session(ttl=10) as session:
        order = []
        await asyncio.gather(*(job(session, n, order) for n in range(20)))
        print(f"20 jobs ran one at a time; tokens {order[0]} .. {order[-1]}")
        assert order == sorted(order)


asyncio.run(main())
