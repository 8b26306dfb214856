"""Fencing tokens: a resource that remembers the highest token it has seen
refuses a writer whose lock has silently passed to someone else; a
resource that can ask the service checks the token directly.

    python3 fencing.py
"""
import raftlock


class Storage:
    """A store that accepts a write only with a token at least as high as
    any it accepted before."""

    def __init__(self):
        self.highest = 0

    def write(self, token, data):
        if token < self.highest:
            raise PermissionError(f"stale token {token} < {self.highest}: write of {data!r} refused")
        self.highest = token
        print(f"wrote {data!r} with token {token}")


storage = Storage()
with raftlock.Client.from_env() as client:
    with client.session(ttl=10) as old, client.session(ttl=10) as new:
        old_lock = old.lock("storage/primary")
        old_token = old_lock.acquire(timeout=5)
        storage.write(old_token, "from the first holder")
        old_lock.release()  # as if its lease had run out during a pause
        with new.lock("storage/primary", timeout=5) as lock:
            storage.write(lock.token, "from the next holder")
            print("the service says the new token is current:",
                  client.check_token("storage/primary", lock.token))
            print("and the old one is not:", client.check_token("storage/primary", old_token))
            try:
                storage.write(old_token, "late write of the first holder")
            except PermissionError as e:
                print(e)
