#!/usr/bin/env bash
# The man pages render without a warning from man(1)/groff, and each
# documents every option its program's --help lists.
# usage: test_man.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
for page in raftlock.1 raftlockd.8 libraftlock.3; do
	f=$build/man/$page
	[ -s "$f" ] || fail "$f missing"
	warnings=$(MANWIDTH=80 man -l --warnings "$f" 2>&1 >/dev/null)
	[ -z "$warnings" ] || fail "$page: $warnings"
	grep -q '@[A-Z_]*@' "$f" && fail "$page: a placeholder was not filled in"
done
# Every --option of the help text appears in the page (as \-\-option).
check_options() {
	local page=$1 program=$2 opt
	for opt in $("$build/bin/$program" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
		grep -qF -- "${opt//-/\\-}" "$build/man/$page" ||
			fail "$page does not document $opt"
	done
}
check_options raftlockd.8 raftlockd
check_options raftlock.1 raftlock
# The library page names every exported function it lists in SYNOPSIS.
for fn in $(grep -o 'raftlock_[a-z_]*(' "$build/man/libraftlock.3" | tr -d '(' | sort -u); do
	grep -q "RAFTLOCK_API.* $fn(\|RAFTLOCK_API.*\*$fn(" "$src/client/raftlock.h" ||
		fail "libraftlock.3 names $fn, which raftlock.h does not declare"
done
echo "man pages OK"
