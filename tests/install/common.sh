# Sourced by the install tests: their arguments and their way to fail.
# usage (in a test): . "$(dirname "$0")/common.sh" "$@"
src=$1   # the source tree
build=$2 # the build tree

# Ends the test with a message naming what is wrong.
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# What tests/install/consumer prints when built against raftlock VERSION.
consumer_output() {
	echo "$1|the lock is held by another owner|1|message"
}
