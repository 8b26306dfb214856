"""Read-only views of the cluster: node status, locks, sessions.

The library returns these as C structures the caller frees; the functions
here copy them into plain dataclasses and free the C memory at once, so a
Python object never points into library memory.
"""

from dataclasses import dataclass, field
from typing import List, Optional


def _items(array, n):
    """The n elements of a C array (NULL when n is 0)."""
    return array[:n] if n else []


def _s(b):
    return b.decode(errors="replace") if b is not None else None


@dataclass(frozen=True)
class Member:
    id: int
    raft_address: str
    client_address: str


@dataclass(frozen=True)
class NodeStatus:
    """One node's own view (raftlock_status_get): no quorum needed."""
    node_id: int
    role: str  # "leader", "follower", "candidate", "unavailable"
    ready: bool
    term: int
    commit_index: int
    applied_index: int
    last_index: int
    leader_id: int
    leader_address: Optional[str]
    cluster_time: int
    next_token: int
    sessions: int
    locks: int
    cluster: Optional[str]
    members: List[Member] = field(default_factory=list)


@dataclass(frozen=True)
class Owner:
    client_name: Optional[str]
    host: Optional[str]
    pid: int


@dataclass(frozen=True)
class Holder:
    session: int
    owner: int  # lock handle id
    mode: str  # "exclusive" or "shared"
    permits: int
    count: int  # nesting depth
    token: int
    granted_index: int
    granted_time: int  # cluster time, ms
    who: Owner


@dataclass(frozen=True)
class Waiter:
    session: int
    owner: int
    mode: str
    permits: int
    queued_time: int
    who: Owner


@dataclass(frozen=True)
class LockInfo:
    name: str
    kind: str  # "mutex", "rwlock" or "semaphore"
    limit: int
    delay_until: int
    lock_delay_ms: int
    cluster_time: int
    holders: List[Holder]
    waiters: List[Waiter]
    # How many the lock has: more than the lists when the answer cut them
    # to fit a frame (the first ones are kept; the holders from the token
    # asked after).
    holders_total: int = 0
    waiters_total: int = 0
    # Holders granted after the last one listed exist: ask again with
    # holders_after=its token (Client.lock_info).
    holders_more: bool = False


@dataclass(frozen=True)
class SessionInfo:
    id: int
    ttl_ms: int
    deadline: int
    opened_time: int
    who: Owner
    locks: List[str]
    # How many the session holds or awaits: more than `locks` when the
    # answer cut the list to fit a frame.
    locks_total: int = 0


@dataclass(frozen=True)
class AclRule:
    identity: str  # a name, or "*" for every authenticated identity
    prefix: str  # lock names it covers ("" = every name)
    perms: str  # "lock,read", "admin", ...


_KINDS = {1: "mutex", 2: "rwlock", 3: "semaphore"}
_MODES = {0: "exclusive", 1: "shared"}


def _owner(o):
    return Owner(_s(o.client_name), _s(o.host), o.pid)


def status_from_c(st):
    members = [Member(m.id, _s(m.raft_address), _s(m.client_address))
               for m in _items(st.members, st.n_members)]
    return NodeStatus(st.node_id, _s(st.role), st.ready, st.term, st.commit_index,
                      st.applied_index, st.last_index, st.leader_id, _s(st.leader_address),
                      st.cluster_time, st.next_token, st.sessions, st.locks, _s(st.cluster),
                      members)


def lock_info_from_c(li):
    holders = [Holder(h.session, h.owner, _MODES.get(h.mode, str(h.mode)), h.permits, h.count,
                      h.token, h.granted_index, h.granted_time, _owner(h.who))
               for h in _items(li.holders, li.n_holders)]
    waiters = [Waiter(w.session, w.owner, _MODES.get(w.mode, str(w.mode)), w.permits,
                      w.queued_time, _owner(w.who))
               for w in _items(li.waiters, li.n_waiters)]
    return LockInfo(_s(li.name), _KINDS.get(li.kind, str(li.kind)), li.limit, li.delay_until,
                    li.lock_delay_ms, li.cluster_time, holders, waiters, li.holders_total,
                    li.waiters_total, li.holders_more)


def session_info_from_c(si):
    return SessionInfo(si.id, si.ttl_ms, si.deadline, si.opened_time, _owner(si.who),
                       [_s(n) for n in _items(si.locks, si.n_locks)], si.locks_total)


def acl_rule_from_c(r, perms_text):
    return AclRule(_s(r.identity), _s(r.prefix), perms_text(r.perms))
