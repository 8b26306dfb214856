#!/usr/bin/env bash
# Runs the command sequences of docs/OPERATIONS.md ("Membership" and
# "Replacing a machine") as written, in order, against nodes on loopback:
# create a 3-node cluster (--bootstrap), add member 4 (--join) and see it
# become a voter, remove it, lose node 3 with its disk, replace it by
# member 6, and check that the cluster then survives losing another
# original node with every lock it had granted. The documentation's
# 127.0.0.1:71NN / 72NN ports are mapped to free ones, NAME to this run's
# cluster and /var/lib/raftlock to a directory per node.
#
# Usage: test_operations.sh BUILD_DIR SOURCE_DIR
set -euo pipefail

build=$1
src=$2
py=${RAFTLOCK_PYTHON:-python3} # ctest gives Debian's
bin=$build/bin
doc=$src/docs/OPERATIONS.md
work=$(mktemp -d /tmp/raftlock-ops.XXXXXX)
cluster=ops-$$
# Ports below the kernel's ephemeral range: client PNN and raft (P+100)NN
# for a prefix P of 100..199 (10000..19999 and 20000..29999).
prefix=$((100 + $$ % 100))
declare -A pids=()

cleanup() {
	local id
	for id in "${!pids[@]}"; do kill -9 "${pids[$id]}" 2>/dev/null || true; done
	[ -n "${holder:-}" ] && kill "$holder" 2>/dev/null || true
	if [ "${keep:-0}" = 1 ]; then echo "logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

fail() {
	echo "test_operations: $*" >&2
	keep=1
	exit 1
}

# 127.0.0.1:71NN -> client port, 127.0.0.1:72NN -> raft port of this run.
map_ports() {
	sed -E -e "s/127\.0\.0\.1:71([0-9][0-9])/127.0.0.1:$prefix\1/g" \
		-e "s/127\.0\.0\.1:72([0-9][0-9])/127.0.0.1:$((prefix + 100))\1/g"
}
export RAFTLOCK_ENDPOINTS
RAFTLOCK_ENDPOINTS=$(echo "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103" | map_ports)

# The documentation's commands, run for real.
raftlock() { "$bin/raftlock" --timeout 20000 "$@"; }
raftlockd() {
	local args=() id="" a prev=""
	for a in "$@"; do
		[ "$prev" = --id ] && id=$a
		[ "$a" = /var/lib/raftlock ] && a=$work/data-$id
		[ "$prev" = --config ] && id=$(sed -n 's/^id = //p' "$a")
		args+=("$a")
		prev=$a
	done
	"$bin/raftlockd" "${args[@]}" >>"$work/n$id.log" 2>&1 &
	pids[$id]=$!
	disown "$!" # killed on purpose below: no job notices
}

# The fenced blocks of the two sections, in order, without sample output
# ("$ ..."), blocks separated by a line "#--".
blocks() {
	"$py" - "$doc" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
text = text[text.index("\n## Membership"):]
for block in re.findall(r"^\s*```\n(.*?)^\s*```", text, re.S | re.M):
    lines = [l.strip() for l in block.splitlines()]
    if lines and not lines[0].startswith("$"):
        print("\n".join(lines))
        print("#--")
EOF
}
mapfile -t -d $'\x1e' steps < <(blocks | awk 'BEGIN{RS="#--\n"; ORS="\x1e"} NF')
[ ${#steps[@]} -eq 5 ] || fail "expected 5 command sequences in $doc, found ${#steps[@]}"

run_step() { # step text with NAME and ports mapped
	local text
	text=$(printf '%s\n' "$1" | map_ports | sed "s/\bNAME\b/$cluster/g")
	echo "+ $text"
	eval "$text"
}

wait_role() { # id role
	local i
	for i in $(seq 200); do
		raftlock member list 2>/dev/null | awk -v id="$1" -v r="$2" '$1 == id && $2 == r {f=1} END {exit !f}' &&
			return 0
		sleep 0.1
	done
	raftlock member list >&2 || true
	fail "member $1 is not $2"
}

# 1. A new cluster: three nodes, each started once with --bootstrap.
for i in 1 2 3; do
	{
		echo "id = $i"
		echo "cluster = $cluster"
		echo "data-dir = $work/data-$i"
		echo "election-timeout = 500"
		echo "heartbeat-timeout = 50"
		echo "log-level = warn"
		for m in 1 2 3; do echo "member = $m,127.0.0.1:720$m,127.0.0.1:710$m"; done
	} | map_ports >"$work/node$i.conf"
	run_step "${steps[0]//\/etc\/raftlock\/raftlockd.conf/$work/node$i.conf}"
done
for i in $(seq 100); do raftlock status >/dev/null 2>&1 && break; sleep 0.2; done
raftlock --timeout 20000 member list >/dev/null || fail "no leader"

# A lock held through everything below.
"$bin/raftlock" lock ops/held -- sleep 1000 >>"$work/holder.log" 2>&1 &
holder=$!
disown "$holder"
for i in $(seq 100); do raftlock holders ops/ 2>/dev/null | grep -q ops/held && break; sleep 0.1; done
token=$(raftlock holders ops/ --json | "$py" -c 'import json,sys; print(json.load(sys.stdin)[0]["holders"][0]["token"])')

# 2-3. Add member 4 and start it with --join: it becomes a voter.
run_step "${steps[1]}"
wait_role 4 standby
run_step "${steps[2]}"
wait_role 4 voter

# 4. Remove it.
run_step "${steps[3]}"
raftlock member list | awk '$1 == 4 {exit 1}' || fail "member 4 still listed"
kill "${pids[4]}"
unset 'pids[4]'

# 5. Node 3's machine is lost with its disk; member 6 replaces it.
kill -9 "${pids[3]}"
unset 'pids[3]'
rm -rf "$work/data-3"
run_step "${steps[4]}"
wait_role 6 voter
[ "$(raftlock member list | awk 'NR > 1' | wc -l)" = 3 ] || fail "not 3 members"
raftlock --json member list | tee "$work/members.json" | "$py" -c '
import json, sys
d = json.load(sys.stdin)
ids = sorted(m["id"] for m in d["members"] if m["role"] == "voter")
assert ids == [1, 2, 6] and d["leader_id"] in ids, d
' || fail "member list --json: $(cat "$work/members.json")"

# Member 6 votes: without node 2 the cluster still answers, and the lock
# taken at the start is held with its token.
kill -9 "${pids[2]}"
unset 'pids[2]'
now=$(raftlock holders ops/ --json | "$py" -c 'import json,sys; print(json.load(sys.stdin)[0]["holders"][0]["token"])')
[ "$now" = "$token" ] || fail "held token $token became $now"
kill "$holder" 2>/dev/null || true
echo "test_operations: every command sequence of docs/OPERATIONS.md ran as documented"
