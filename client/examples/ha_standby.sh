#!/bin/sh
# ha_standby: of all instances started with the same name, N run the command
# and the rest wait; when a running one dies or loses its session, a waiting
# one takes over (after TTL + election timeout + lock-delay at worst).
# Start this in three terminals, then kill -9 the one that runs.
exec raftlock run --permits "${PERMITS:-1}" "${1:-examples/ha}" -- \
	sh -c 'echo "active with token $RAFTLOCK_TOKEN"; while :; do sleep 1; done'
