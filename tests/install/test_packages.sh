#!/usr/bin/env bash
# The Debian packages, as an operator meets them: built with
# deploy/build-deb (every lintian tag must be explained in
# docs/PACKAGING.md), installed with dpkg -i into a fresh Debian 12 root
# made by debootstrap (their dependencies from apt inside it), and then a
# 3-node cluster run from the installed paths as the user the package
# created, and `raftlock lock` against it, all on loopback; programs build
# against libraftlock-dev with pkg-config and with its CMake package.
#
# Needs root and the Debian mirror of this machine's apt sources (read
# here, at run time). The debootstrap download is kept as a tarball in
# BUILD_DIR/packaging-cache, so a second run starts from a fresh root
# without downloading it again.
# usage: test_packages.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot)"
for tool in dpkg-buildpackage dh lintian debootstrap; do
	command -v "$tool" >/dev/null || fail "$tool missing: deploy/install-deps --packaging"
done

# The bookworm mirror and keyring of this machine's apt sources.
source_line=$("$src/deploy/debian-source") || fail "no Debian bookworm apt source"
read -r mirror keyring <<<"$source_line"

work=$(mktemp -d /tmp/raftlock-packages-test-XXXXXX)
root=$work/root
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	for m in "$root/dev" "$root/proc"; do
		mountpoint -q "$m" && umount -l "$m"
	done
	rm -rf "$work"
}
trap cleanup EXIT

echo "== build the packages"
"$src/deploy/build-deb" "$work/debs" >"$work/build-deb.out" 2>&1 ||
	{ cat "$work/build-deb.out"; fail "deploy/build-deb"; }
for p in raftlockd libraftlock0 libraftlock-dev; do
	ls "$work/debs/${p}_"*.deb >/dev/null 2>&1 || fail "no $p package"
done
# lintian: errors fail; every other tag must be explained.
grep -q '^E: ' "$work/debs/lintian.txt" && { cat "$work/debs/lintian.txt"; fail "lintian errors"; }
for tag in $(awk -F': ' '/^[WIPX]: /{split($3, t, " "); print t[1]}' "$work/debs/lintian.txt" |
	sort -u); do
	grep -q -- "$tag" "$src/docs/PACKAGING.md" ||
		fail "lintian tag $tag is not explained in docs/PACKAGING.md"
done
sed 's/^/  lintian: /' "$work/debs/lintian.txt"

echo "== a fresh Debian 12 root"
cache=$build/packaging-cache/bookworm-minbase.tar
mkdir -p "$(dirname "$cache")"
if [ ! -s "$cache" ]; then
	debootstrap --variant=minbase --make-tarball="$cache.part" bookworm "$work/tarball" \
		"$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log"; fail "debootstrap --make-tarball"; }
	mv "$cache.part" "$cache"
	rm -rf "$work/tarball"
fi
debootstrap --variant=minbase --unpack-tarball="$cache" bookworm "$root" "$mirror" \
	>"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
mount --bind /dev "$root/dev"
mount -t proc proc "$root/proc"
in_root() { chroot "$root" "$@"; }
printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-backports\nComponents: main\nSigned-By: %s\n' \
	"$mirror" "$keyring" >"$root/etc/apt/sources.list.d/debian.sources"
[ -e "$root$keyring" ] || cp "$keyring" "$root$keyring"
rm -f "$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

echo "== dpkg -i, then the dependencies from apt"
export DEBIAN_FRONTEND=noninteractive
in_root apt-get update -q >"$work/apt.log" 2>&1 || { tail "$work/apt.log"; fail "apt-get update"; }
# libraft >= 0.22 is in bookworm-backports only.
in_root apt-get install -y -q -t bookworm-backports libraft0 >>"$work/apt.log" 2>&1 ||
	{ tail "$work/apt.log"; fail "libraft0 from bookworm-backports"; }
mkdir "$root/tmp/debs"
cp "$work/debs/"*.deb "$root/tmp/debs/"
rm -f "$root"/tmp/debs/*-dbgsym_*.deb
if ! in_root sh -c 'dpkg -i /tmp/debs/*.deb' >"$work/dpkg.log" 2>&1; then
	in_root apt-get install -f -y -q >>"$work/apt.log" 2>&1 ||
		{ cat "$work/dpkg.log"; tail "$work/apt.log"; fail "apt-get -f install"; }
fi
for p in raftlockd libraftlock0 libraftlock-dev; do
	in_root dpkg-query -W -f='${Status}\n' "$p" | grep -qx 'install ok installed' ||
		fail "$p is not installed"
done

echo "== what the packages set up"
user=$(in_root getent passwd raftlock) || fail "no user raftlock"
uid=$(cut -d: -f3 <<<"$user")
[ "$uid" -lt 1000 ] || fail "raftlock is not a system user: $user"
[ -L "$root/etc/systemd/system/multi-user.target.wants/raftlockd.service" ] ||
	fail "raftlockd.service is not enabled"
grep -qx 'ExecStart=/usr/bin/raftlockd --config /etc/raftlock/raftlockd.conf $RAFTLOCKD_START' \
	"$root/lib/systemd/system/raftlockd.service" || fail "the unit does not run /usr/bin/raftlockd"
for f in /usr/share/man/man1/raftlock.1.gz /usr/share/man/man8/raftlockd.8.gz \
	/usr/share/man/man3/libraftlock.3.gz /usr/share/bash-completion/completions/raftlock \
	/usr/share/doc/raftlockd/copyright /usr/share/doc/libraftlock0/copyright \
	/usr/share/doc/raftlockd/examples/3-nodes/node1.conf /usr/include/raftlock.h \
	/usr/lib/x86_64-linux-gnu/pkgconfig/raftlock.pc; do
	[ -e "$root$f" ] || fail "$f is missing"
done
version=$(in_root /usr/bin/raftlockd --version) || fail "raftlockd --version"
in_root /usr/bin/raftlock --version | grep -qx "raftlock ${version#raftlockd }" ||
	fail "raftlock --version"
# Enabled but not started: no raftlockd runs from this root.
for p in $(pgrep -x raftlockd || true); do
	[ "$(readlink "/proc/$p/root")" != "$root" ] || fail "the package started raftlockd"
done

echo "== programs built against libraftlock-dev (pkg-config, CMake package)"
in_root apt-get install -y -q --no-install-recommends gcc libc6-dev pkgconf cmake make \
	>>"$work/apt.log" 2>&1 || { tail "$work/apt.log"; fail "a compiler in the root"; }
cp -r "$src/tests/install/consumer" "$root/tmp/consumer"
want=$(consumer_output "${version#raftlockd }")
got=$(in_root sh -c 'cd /tmp/consumer &&
	cc -o pc consumer.c $(pkg-config --cflags --libs raftlock) && ./pc') ||
	fail "pkg-config consumer: $got"
[ "$got" = "$want" ] || fail "pkg-config consumer printed '$got'"
got=$(in_root sh -c 'cmake -S /tmp/consumer -B /tmp/consumer/build >/dev/null &&
	make -C /tmp/consumer/build >/dev/null && /tmp/consumer/build/consumer') ||
	fail "CMake consumer: $got"
[ "$got" = "$want" ] || fail "CMake consumer printed '$got'"

echo "== a 3-node cluster from the installed paths"
read -r -a port <<<"$(python3 -c '
import socket
ss = [socket.socket() for _ in range(6)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')"
example=$root/usr/share/doc/raftlockd/examples/3-nodes/node1.conf
endpoints=""
for i in 1 2 3; do
	conf=$root/etc/raftlock/node$i.conf
	grep -v -e '^id' -e '^member' -e '^metrics' -e '^data-dir' "$example" >"$conf"
	{
		echo "id = $i"
		echo "data-dir = /var/lib/raftlock/node$i"
		echo "raft-address = 127.0.0.1:${port[i + 2]}"
		echo "client-address = 127.0.0.1:${port[i - 1]}"
		for j in 1 2 3; do
			echo "member = $j,127.0.0.1:${port[j + 2]},127.0.0.1:${port[j - 1]}"
		done
	} >>"$conf"
	endpoints+=${endpoints:+,}127.0.0.1:${port[i - 1]}
	install -d -o "$uid" -m 0750 "$root/var/lib/raftlock/node$i"
	in_root /usr/bin/raftlockd --config "/etc/raftlock/node$i.conf" --check-config >/dev/null ||
		fail "node$i.conf: $(in_root /usr/bin/raftlockd --config "/etc/raftlock/node$i.conf" --check-config 2>&1)"
	chroot --userspec=raftlock:raftlock "$root" /usr/bin/raftlockd \
		--config "/etc/raftlock/node$i.conf" --bootstrap >"$work/node$i.log" 2>&1 &
	pids+=($!)
done
rl() { in_root /usr/bin/raftlock --endpoints "$endpoints" --timeout 3000 "$@"; }
ready=0
for _ in $(seq 1 60); do
	if rl status --json 2>/dev/null | grep -q '"role": "leader", "ready": true'; then
		ready=1
		break
	fi
	sleep 0.5
done
[ "$ready" = 1 ] || { tail "$work"/node*.log; fail "no ready leader in 30 s"; }
out=$(rl lock demo/printer -- sh -c 'echo "token=$RAFTLOCK_TOKEN"; /usr/bin/raftlock --endpoints '"$endpoints"' holders demo/') ||
	fail "raftlock lock: $out"
grep -q '^token=[1-9][0-9]*$' <<<"$out" || fail "raftlock lock printed: $out"
grep -q '^demo/printer  exclusive  token ' <<<"$out" || fail "the holder was not listed: $out"
[ -z "$(rl holders demo/)" ] || fail "the lock was not released"
# The nodes ran as raftlock (numeric ids: the host's names differ) and
# wrote their state as raftlock.
for p in "${pids[@]}"; do
	[ "$(stat -c %u "/proc/$p")" = "$uid" ] || fail "node $p does not run as raftlock"
done
owners=$(find "$root/var/lib/raftlock/node1" -newer "$root/etc/raftlock/node1.conf" \
	-printf '%U\n' | sort -u)
[ "$owners" = "$uid" ] || fail "node1 wrote files as uids: $owners"
for p in "${pids[@]}"; do
	kill -TERM "$p"
done
for p in "${pids[@]}"; do
	wait "$p" || fail "a node did not stop cleanly: $(tail -3 "$work"/node*.log)"
done
pids=()
echo "packages OK: $version, lock taken with $(head -1 <<<"$out")"
