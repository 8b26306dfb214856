"""Membership changes, made with the raftlock command the way
docs/OPERATIONS.md describes them: add a member (then start its node with
--join) and wait until the leader made it a voter; remove one; replace a
member whose machine is lost by a new one (a new id on the same slot).
Each step is verified; anything else raises MembershipError."""

import time

from . import cluster as C

VOTER_TIMEOUT_S = 40  # a new member catches up and is promoted within this


class MembershipError(Exception):
    pass


def members(cl):
    """{member id: role} as the leader lists them."""
    rc, out = cl.cli(C.ADMIN, ["member", "list"], timeout=30,
                     request_ms=10000)
    if rc != 0:
        raise MembershipError("member list: %s" % out)
    roles = {}
    for line in out.splitlines()[1:]:
        f = line.split("\t")
        if len(f) >= 2 and f[0].isdigit():
            roles[int(f[0])] = f[1]
    return roles


# A removal is refused while a majority of the voters that would remain do
# not answer the leader (docs/OPERATIONS.md, "Removing a member"): a voter
# restarted by an earlier fault may still be receiving a snapshot. As an
# operator would, wait and try again, a bounded number of times.
REMOVAL_REFUSED = "must answer for the cluster to commit"
REMOVAL_TRIES = 10
REMOVAL_RETRY_S = 2


def _member(cl, args):
    for attempt in range(REMOVAL_TRIES):
        rc, out = cl.cli(C.ADMIN, ["member"] + args, timeout=60,
                         request_ms=30000)
        if rc == 0:
            return
        if REMOVAL_REFUSED not in out or attempt + 1 == REMOVAL_TRIES:
            break
        time.sleep(REMOVAL_RETRY_S)
    raise MembershipError("member %s: %s" % (" ".join(args), out))


def wait_role(cl, member_id, role, timeout=VOTER_TIMEOUT_S):
    """Waits until member_id has `role` (None: is no member)."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        try:
            seen = members(cl).get(member_id)
            if seen == role:
                return
        except MembershipError as e:
            seen = str(e)
        time.sleep(0.3)
    raise MembershipError("member %d is %s, not %s, after %ds" % (
        member_id, seen, role or "removed", timeout))


def add(cl, slot):
    """A new member (new id) on a free slot, started with --join; returns
    once it votes."""
    new = cl.new_id()
    slot.wipe(new)
    _member(cl, ["add", str(new), slot.raft_address, slot.client_address])
    if slot in cl.spares:
        cl.spares.remove(slot)
    cl.nodes.append(slot)
    slot.start()
    wait_role(cl, new, "voter")
    return new


def remove(cl, node):
    """Removes node's member (the leader too: it hands over first) and stops
    the node; its slot becomes free."""
    _member(cl, ["remove", str(node.id)])
    wait_role(cl, node.id, None)
    node.stop()
    cl.nodes.remove(node)
    cl.spares.append(node)


def replace(cl, node):
    """node's machine is lost with its data: a new member (new id) takes
    its place on the same slot; returns once it votes."""
    old, new = node.id, cl.new_id()
    node.wipe(new)
    _member(cl, ["replace", str(old), str(new), node.raft_address,
                 node.client_address])
    node.start()
    wait_role(cl, new, "voter")
    return old, new
