"""The liveness bound, made up of the timeouts that a healthy majority and
its clients need to get back to granting (jepsen/README.md, Checkers 6).

The figures are the ones the runner gives the nodes and the workers; the
client library's own are client/transport.c's CLIENT_* constants.
"""

# raftlockd --election-timeout, passed to every node by the runner.
ELECTION_TIMEOUT_MS = 1000
# jepsen-worker --request-timeout-ms: a call, retries included, returns
# within it; the library also sends a request nobody answers to another
# node after CLIENT_STALL_MS, the same 5 s.
WORKER_REQUEST_TIMEOUT_MS = 5000
# CLIENT_CONNECT_TIMEOUT_MS: one connect attempt to a node that does not
# answer (stopped, or its packets dropped).
CLIENT_CONNECT_TIMEOUT_MS = 1000


def liveness_ms(ttl_ms, election_timeout_ms=ELECTION_TIMEOUT_MS,
                request_timeout_ms=WORKER_REQUEST_TIMEOUT_MS,
                connect_timeout_ms=CLIENT_CONNECT_TIMEOUT_MS):
    """How long a healthy, connected majority may go without a grant.

    - Leader: a follower stands after a randomized 1-2 election timeouts
      of silence (libraft); a split vote costs one more such round: 4 ET.
    - Clients: a worker's call to a node that will not answer returns
      within its request timeout, and its next call may first spend one
      connect timeout on an unreachable node.
    - Holder: a lock whose holder stopped renewing (paused, killed, cut
      off) is free one TTL after its last renewal; cluster time stands
      still while there is no leader, which the election term covers.
    """
    return (4 * election_timeout_ms + request_timeout_ms + connect_timeout_ms
            + ttl_ms)
