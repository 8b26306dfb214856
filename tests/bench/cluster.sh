# Shell functions that run a local raftlock cluster on 127.0.0.1 for the
# benchmarks and the smoke test. Source peers/lib.sh first (port picking and
# the PID file: every node is recorded in $PEERS_PIDFILE and stopped by PID).
#
# The cluster's layout lives in $RL_WORK/cluster.env so that a command run
# later (the state workload's restart commands) can load it:
#   bash -c '. tests/bench/peers/lib.sh; . tests/bench/cluster.sh;
#            rl_load WORK; rl_cluster_stop'

# rl_init WORK N RAFTLOCKD [CERTS [TLS]]: picks ports and data dirs for N
# nodes. With CERTS (a directory made by deploy/make-certs), the nodes speak
# mutual TLS on both ports: peer TLS between members, client-tls mutual;
# TLS = client or peer keeps it to that port only (default both).
rl_init() {
	local work=$1 n=$2 bin=$3 certs=${4:-} tls=${5:-both} i
	mkdir -p "$work"
	{
		echo "RL_WORK='$work'"
		echo "RL_BIN='$bin'"
		echo "RL_CERTS='$certs'"
		echo "RL_TLS='$tls'"
		echo "RL_N=$n"
		echo "RL_NAME='bench-$$'"
		echo "PEERS_PIDFILE='$PEERS_PIDFILE'"
		for i in $(seq "$n"); do
			echo "RL_RAFT_$i=127.0.0.1:$(peers_free_port)"
			echo "RL_CLIENT_$i=127.0.0.1:$(peers_free_port)"
		done
	} >"$work/cluster.env"
	rl_load "$work"
}

# rl_load WORK: loads the layout; sets RL_ADDRESSES and RL_DATA_DIRS.
rl_load() {
	. "$1/cluster.env"
	local i raft client
	RL_ADDRESSES=""
	RL_DATA_DIRS=""
	for i in $(seq "$RL_N"); do
		client=RL_CLIENT_$i
		RL_ADDRESSES+="${RL_ADDRESSES:+,}${!client}"
		RL_DATA_DIRS+="${RL_DATA_DIRS:+,}$RL_WORK/n$i"
	done
}

# The --member flags of the initial members (1..$RL_MEMBERS or all).
rl_member_flags() {
	local i raft client upto=${1:-$RL_N}
	for i in $(seq "$upto"); do
		raft=RL_RAFT_$i
		client=RL_CLIENT_$i
		printf -- '--member %s,%s,%s ' "$i" "${!raft}" "${!client}"
	done
}

# The TLS flags of node I when the cluster has certificates (none else).
rl_tls_flags() {
	local c=$RL_CERTS i=$1
	[ -n "$c" ] || return 0
	[ "${RL_TLS:-both}" = client ] ||
		printf -- '--%s %s ' peer-tls-cert "$c/node-$i.pem" peer-tls-key "$c/node-$i.key" \
			peer-tls-ca "$c/ca.pem"
	[ "${RL_TLS:-both}" = peer ] ||
		printf -- '--%s %s ' client-tls mutual client-tls-cert "$c/node-$i.pem" \
			client-tls-key "$c/node-$i.key" client-tls-ca "$c/ca.pem"
}

# rl_node_start I [MEMBERS]: starts node I (its data dir kept if present).
rl_node_start() {
	local i=$1 members=${2:-3} raft=RL_RAFT_$1 client=RL_CLIENT_$1
	mkdir -p "$RL_WORK/n$i"
	# shellcheck disable=SC2046
	"$RL_BIN" --id "$i" --data-dir "$RL_WORK/n$i" --cluster "$RL_NAME" \
		--raft-address "${!raft}" --client-address "${!client}" --bootstrap \
		$(rl_member_flags "$members") $(rl_tls_flags "$i") >>"$RL_WORK/n$i.log" 2>&1 &
	echo $! >"$RL_WORK/n$i.pid"
	peers_track $! raftlockd
}

# rl_cluster_start: starts the 3 initial members; sets RL_PIDS (node order).
rl_cluster_start() {
	local i
	for i in 1 2 3; do
		rl_node_start "$i" 3
	done
	rl_pids
}

# rl_pids: RL_PIDS of the nodes that have a PID file, in node-id order.
rl_pids() {
	local i
	RL_PIDS=""
	for i in $(seq "$RL_N"); do
		[ -f "$RL_WORK/n$i.pid" ] && RL_PIDS+="${RL_PIDS:+,}$(cat "$RL_WORK/n$i.pid")"
	done
}

# rl_cluster_stop: SIGTERM to every node (clean shutdown), in parallel.
rl_cluster_stop() {
	local i
	for i in $(seq "$RL_N"); do
		[ -f "$RL_WORK/n$i.pid" ] && peers_stop_pid "$(cat "$RL_WORK/n$i.pid")" raftlockd &
	done
	wait
}

# rl_cluster_restart: starts every node that has a data dir again.
rl_cluster_restart() {
	local i
	for i in $(seq "$RL_N"); do
		[ -d "$RL_WORK/n$i" ] && rl_node_start "$i" 3
	done
	return 0
}

# rl_cluster_wipe: stops every node and removes its LMDB files, so that the
# next start rebuilds the state from the raft snapshot and log.
rl_cluster_wipe() {
	rl_cluster_stop
	local i
	for i in $(seq "$RL_N"); do
		[ -d "$RL_WORK/n$i" ] && find "$RL_WORK/n$i" -name '*.mdb' -delete
	done
	return 0
}

# rl_node_replace I: stops node I, deletes its whole data directory (raft log,
# snapshots, LMDB) and starts it again empty, as when a machine is replaced;
# it must catch up from the leader, by snapshot once the log is compacted.
# Prints the node's client address.
rl_node_replace() {
	local i=$1 client=RL_CLIENT_$1
	[ -f "$RL_WORK/n$i.pid" ] && peers_stop_pid "$(cat "$RL_WORK/n$i.pid")" raftlockd
	rm -rf "${RL_WORK:?}/n$i"
	rl_node_start "$i" 3
	echo "${!client}"
}
