"""What every healthy run must have given the checkers to check.

A run in which every acquire timed out and no read of the lock table
came back passes every checker with nothing checked. Each floor below is
one that a healthy run meets whatever the load of the machine, because
the runner itself waits for it after the final heal (runner.run_one) or
the workers do it hundreds of times a run; a floor that a slow but
healthy run could miss would be worse than none.
"""

# Workloads whose holders read and write the fenced register while they
# hold (jepsen/worker.c: every round but the semaphore's and the durable
# worker's).
FENCED_WORKLOADS = ("mutex", "rwlock", "reentrant", "waiters", "pairs",
                    "election")


def check(res, workload):
    """res: the checkers' results of the run. Returns {"valid", "failures"
    (one reason per floor missed), and the figures compared}."""
    grants = res["summary"]["op_counts"].get("acquire:ok", 0)
    dur = res["durability"]
    fen = res["fencing"]
    register = fen["register_accepted"] + fen["register_refused"]
    failures = []
    # The runner waits after the final heal for a grant on every lock
    # tried (liveness), the durable worker's own included.
    if grants < 1:
        failures.append("no acquire was granted: no checker had a grant to "
                        "check")
    # The durable worker runs in every run and reads the table every
    # 300 ms while it holds; the runner waits after the final heal for a
    # read invoked after it.
    if dur["reads"] < 1:
        failures.append("no read of the lock table came back: durability "
                        "checked nothing")
    # That read after the final heal follows every restart-all.
    if dur["restart_all"] and dur["reads_after_restart_all"] < 1:
        failures.append("no read of the lock table after a restart-all: "
                        "nothing showed that acknowledged state outlived "
                        "kill -9 of every node")
    # Each grant of these workloads reads the register first while its
    # lease is valid, as it is right after a grant on a healthy cluster.
    if workload in FENCED_WORKLOADS and register < 1:
        failures.append("no access of the fenced register: fencing and the "
                        "counter checked nothing")
    # Every campaigner observes its election from its start; the first
    # event is the current state.
    if workload == "election" and res["observe"]["observations"] < 1:
        failures.append("no observation of the election: observe checked "
                        "nothing")
    return {
        "valid": not failures,
        "failures": failures,
        "grants": grants,
        "table_reads": dur["reads"],
        "table_reads_after_restart_all": dur["reads_after_restart_all"],
        "register_accesses": register,
        "observations": res["observe"]["observations"],
    }
