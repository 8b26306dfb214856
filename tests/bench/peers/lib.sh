# Shell functions that install, start and stop the peers raftlock is compared
# with: a 3-member etcd cluster and one durable Redis node, on 127.0.0.1
# only. Sourced by tests/bench/run and tests/bench/peers/bench-peers.
#
# Every server started here is recorded in $PEERS_PIDFILE as "PID COMMAND"
# and stopped by that PID (peers_stop_all), never by name; a PID whose
# process no longer runs COMMAND is left alone. Callers set a trap.

PEERS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

peers_log() { echo "[peers] $*" >&2; }

# A free TCP port on 127.0.0.1 (the kernel picks one; a tiny race remains).
peers_free_port() {
	"${RAFTLOCK_PYTHON:-python3}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Installs the Debian packages of the peers that are missing.
peers_install() {
	local want=(etcd-server etcd-client golang-go golang-etcd-server-dev redis-server
		libhiredis-dev gnuplot-nox) missing=() p
	for p in "${want[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	peers_log "installing ${missing[*]}"
	local sudo=
	[ "$(id -u)" -ne 0 ] && sudo=sudo
	$sudo apt-get update -q >/dev/null &&
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
			"${missing[@]}" >/dev/null
}

# peers_start_etcd WORKDIR: a 3-member cluster with default (durable)
# settings. Sets ETCD_ENDPOINTS (comma-separated host:port) and ETCD_PIDS.
peers_start_etcd() {
	local work=$1 i cluster="" token="bench-$$-$RANDOM"
	local -a cport pport
	for i in 1 2 3; do
		cport[$i]=$(peers_free_port)
		pport[$i]=$(peers_free_port)
		cluster+="${cluster:+,}e$i=http://127.0.0.1:${pport[$i]}"
	done
	ETCD_ENDPOINTS=""
	ETCD_PIDS=""
	for i in 1 2 3; do
		mkdir -p "$work/etcd$i"
		etcd --name "e$i" --data-dir "$work/etcd$i/data" \
			--listen-client-urls "http://127.0.0.1:${cport[$i]}" \
			--advertise-client-urls "http://127.0.0.1:${cport[$i]}" \
			--listen-peer-urls "http://127.0.0.1:${pport[$i]}" \
			--initial-advertise-peer-urls "http://127.0.0.1:${pport[$i]}" \
			--initial-cluster "$cluster" --initial-cluster-token "$token" \
			--initial-cluster-state new >"$work/etcd$i/log" 2>&1 &
		peers_track $! etcd
		ETCD_PIDS+="${ETCD_PIDS:+,}$!"
		ETCD_ENDPOINTS+="${ETCD_ENDPOINTS:+,}127.0.0.1:${cport[$i]}"
	done
	local deadline=$((SECONDS + 30))
	while ! ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" --command-timeout=2s \
		endpoint health >/dev/null 2>&1; do
		if [ $SECONDS -ge $deadline ]; then
			peers_log "etcd did not become healthy; see $work/etcd*/log"
			return 1
		fi
		sleep 0.3
	done
	peers_log "etcd up: $ETCD_ENDPOINTS (pids $ETCD_PIDS)"
}

# peers_start_redis WORKDIR: Redis with an append-only file fsync'd on every
# write. Sets REDIS_ADDRESS and REDIS_PID.
peers_start_redis() {
	local work=$1 port
	port=$(peers_free_port)
	mkdir -p "$work/redis"
	redis-server --bind 127.0.0.1 --port "$port" --dir "$work/redis" \
		--appendonly yes --appendfsync always --save "" --daemonize no \
		--logfile "$work/redis/log" >/dev/null 2>&1 &
	REDIS_PID=$!
	peers_track $REDIS_PID redis-server
	REDIS_ADDRESS="127.0.0.1:$port"
	local deadline=$((SECONDS + 15))
	until [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ]; do
		if [ $SECONDS -ge $deadline ]; then
			peers_log "redis did not answer; see $work/redis/log"
			return 1
		fi
		sleep 0.2
	done
	peers_log "redis up: $REDIS_ADDRESS (pid $REDIS_PID)"
}

# peers_track PID COMMAND: records a server to stop.
peers_track() { echo "$1 $2" >>"$PEERS_PIDFILE"; }

# peers_is PID COMMAND: the process PID runs COMMAND and has not exited (a
# zombie waiting for its parent counts as exited).
peers_is() {
	local comm stat
	comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 1
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "$comm" = "${2:0:15}" ] && [ "${stat:0:1}" != Z ]
}

# peers_stop_pid PID COMMAND: SIGTERM, then SIGKILL after 10 s.
peers_stop_pid() {
	local pid=$1 i
	peers_is "$pid" "$2" || return 0
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq 100); do
		peers_is "$pid" "$2" || return 0
		sleep 0.1
	done
	peers_is "$pid" "$2" && kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

# Stops every server listed in $PEERS_PIDFILE, in parallel.
peers_stop_all() {
	[ -f "${PEERS_PIDFILE:-}" ] || return 0
	local pid comm
	while read -r pid comm; do
		peers_stop_pid "$pid" "$comm" &
	done <"$PEERS_PIDFILE"
	wait
	: >"$PEERS_PIDFILE"
}

# peers_build_etcdbench OUT: builds the Go generator offline, in GOPATH mode,
# against Debian's Go sources.
peers_build_etcdbench() {
	local out=$1 cache
	cache=$(mktemp -d)
	GO111MODULE=off GOPATH="$PEERS_DIR/go:/usr/share/gocode" GOCACHE="$cache" \
		GOFLAGS= go build -o "$out" etcdbench
	local rv=$?
	rm -rf "$cache"
	return $rv
}
