#!/usr/bin/env bash
# The bash completion of raftlock completes commands, options and, after a
# lock NAME, the command to run, as bash would at the cursor.
# usage: test_completion.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/common.sh" "$@"
[ -r /usr/share/bash-completion/bash_completion ] ||
	fail "bash-completion is not installed (deploy/install-deps installs it)"

# What the completion offers for LINE (the cursor at its end), one a line.
# Outside an interactive completion bash's compopt complains: not an error.
complete_line() {
	PATH=$build/bin:$PATH RAFTLOCK_ENDPOINTS=127.0.0.1:1 bash --norc --noprofile -c '
		source /usr/share/bash-completion/bash_completion
		source "$1"
		line=$2
		read -r -a COMP_WORDS <<<"$line"
		[[ $line == *" " ]] && COMP_WORDS+=("")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_LINE=$line
		COMP_POINT=${#line}
		_raftlock raftlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
		printf "%s\n" "${COMPREPLY[@]}"
	' complete "$src/deploy/bash-completion/raftlock" "$1" 2>&1 >&3 |
		grep -v "compopt: not currently executing completion function" >&2
} 3>&1

expect() {
	local line=$1 want=$2 got
	got=$(complete_line "$line")
	grep -qx -- "$want" <<<"$got" || fail "'$line' offers [$(echo $got)], not '$want'"
}
refuse() {
	local line=$1 unwanted=$2 got
	got=$(complete_line "$line")
	grep -qx -- "$unwanted" <<<"$got" && fail "'$line' offers '$unwanted'"
	return 0
}

expect "raftlock " status
expect "raftlock " lock
expect "raftlock st" status
refuse "raftlock st" lock
expect "raftlock --" --endpoints
expect "raftlock --endpoints 127.0.0.1:7101 ho" holders
expect "raftlock lock --con" --conflict-exit-code
expect "raftlock lock --" --shared
refuse "raftlock run --" --shared
expect "raftlock run --" --permits
expect "raftlock lock -n db/migrate -" --child-exit-code
# after NAME: the command to run, and then that command's own arguments
expect "raftlock lock -n db/migrate ech" echo
expect "raftlock lock db/migrate -- ech" echo
expect "raftlock acl " token
expect "raftlock acl list --" --json
expect "raftlock status --" --json
expect "raftlock snap" snapshot
expect "raftlock snapshot " save
echo "bash completion OK"
