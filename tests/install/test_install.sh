#!/usr/bin/env bash
# cmake --install puts every piece where a user looks for it, and programs
# build against the installed tree: through the CMake package
# (raftlock::raftlock), through pkg-config (shared and --static), and the
# installed raftlock and raftlockd run.
# usage: test_install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
tmp=$(mktemp -d /tmp/raftlock-install-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

DESTDIR=$tmp/root cmake --install "$build" >/dev/null
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
root=$tmp/root$prefix
version=$("$build/bin/raftlock" --version | awk '{print $2}')
major=${version%%.*}

for f in bin/raftlockd bin/raftlock include/raftlock.h \
	"$libdir/libraftlock.so" "$libdir/libraftlock.so.$major" \
	"$libdir/libraftlock.so.$version" "$libdir/libraftlock.a" \
	"$libdir/pkgconfig/raftlock.pc" "$libdir/cmake/raftlock/raftlockConfig.cmake" \
	"$libdir/cmake/raftlock/raftlockConfigVersion.cmake" \
	lib/systemd/system/raftlockd.service \
	share/doc/raftlock/LICENSE share/doc/raftlock/README.md \
	share/doc/raftlock/examples/3-nodes/node1.conf \
	share/doc/raftlock/examples/5-nodes/node5.conf \
	share/man/man1/raftlock.1 share/man/man3/libraftlock.3 share/man/man8/raftlockd.8 \
	share/bash-completion/completions/raftlock; do
	[ -e "$root/$f" ] || fail "not installed: $prefix/$f"
done

soname=$(readelf -d "$root/$libdir/libraftlock.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libraftlock.so.$major" ] || fail "SONAME is '$soname'"
# Only the library's own names are exported.
bad=$(nm -D --defined-only "$root/$libdir/libraftlock.so.$version" | awk '$2 ~ /[TDB]/ {print $3}' |
	grep -v '^raftlock_' || true)
[ -z "$bad" ] || fail "exported without the raftlock_ prefix: $bad"

# The unit runs the installed daemon.
grep -qx "ExecStart=$prefix/bin/raftlockd --config /etc/raftlock/raftlockd.conf \$RAFTLOCKD_START" \
	"$root/lib/systemd/system/raftlockd.service" || fail "unit ExecStart"
grep -qx "Documentation=man:raftlockd(8) file://$prefix/share/doc/raftlock/README.md" \
	"$root/lib/systemd/system/raftlockd.service" || fail "unit Documentation"

"$root/bin/raftlock" --version | grep -qx "raftlock $version" || fail "raftlock --version"
"$root/bin/raftlockd" --version | grep -qx "raftlockd $version" || fail "raftlockd --version"

want=$(consumer_output "$version")
# The CMake package.
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$root" \
	>/dev/null || fail "find_package(raftlock)"
make -C "$tmp/consumer" --no-print-directory >/dev/null || fail "consumer build (CMake)"
got=$(LD_LIBRARY_PATH=$root/$libdir "$tmp/consumer/consumer") || fail "consumer (CMake) failed"
[ "$got" = "$want" ] || fail "consumer (CMake) printed '$got'"
readelf -d "$tmp/consumer/consumer" | grep -q "NEEDED.*\[libraftlock.so.$major\]" ||
	fail "the CMake consumer does not link libraftlock.so.$major"

# pkg-config: the .pc file finds the prefix it was moved to.
export PKG_CONFIG_PATH=$root/$libdir/pkgconfig
[ "$(pkg-config --variable=includedir raftlock)" -ef "$root/include" ] ||
	fail "pkg-config includedir: $(pkg-config --variable=includedir raftlock)"
# shellcheck disable=SC2046
cc -o "$tmp/pc-shared" "$src/tests/install/consumer/consumer.c" \
	$(pkg-config --cflags --libs raftlock) || fail "consumer build (pkg-config)"
got=$(LD_LIBRARY_PATH=$root/$libdir "$tmp/pc-shared") || fail "consumer (pkg-config) failed"
[ "$got" = "$want" ] || fail "consumer (pkg-config) printed '$got'"
# shellcheck disable=SC2046
cc -o "$tmp/pc-static" "$src/tests/install/consumer/consumer.c" \
	$(pkg-config --cflags raftlock) "$root/$libdir/libraftlock.a" \
	$(pkg-config --static --libs-only-l raftlock | sed 's/-lraftlock//') ||
	fail "consumer build (static)"
readelf -d "$tmp/pc-static" | grep -q 'libraftlock' && fail "static consumer needs libraftlock.so"
got=$("$tmp/pc-static") || fail "consumer (static) failed"
[ "$got" = "$want" ] || fail "consumer (static) printed '$got'"
echo "install tree OK: $prefix (libraftlock.so.$major, version $version)"
