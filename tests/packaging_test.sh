#!/usr/bin/env bash
# Packaging as a C++ user meets it, run by ./scripts/test after the main build:
#   - a build with shared libraries (the Release configuration at -O0, file by file, clang,
#     -Werror; the libraries, the CLI, the kit and the examples; the tests and simba-bench,
#     which is not installed, are built by the main tree): versioned SONAMEs, `simba
#     --version`, an install, a .deb with its Debian dependencies;
#   - the static main build installed too; tests/consumer built against both installs with
#     find_package(simba 0.2) and with pkg-config, and run; its own Backend proven with the
#     installed conformance kit (find_package(simba COMPONENTS tck), simba::tck);
#   - a build with only the SQLite engine (-O0, clang): no other client library linked, and a
#     Redis URI answered with the CMake option that adds Redis (exit 78).
# Both trees compile with clang where it is installed (./scripts/test installs it), else with
# the default compiler: at -O0 clang compiled the same files in 0.55-0.75 of GCC 12's CPU
# (service_core.cc 1.65 s against 2.31 s, etcd's watches.cc 2.51 against 3.83, the CLI's
# lock.cc 3.30 against 4.31, the kit's contend_cases.cc 2.27 against 4.09), and what these trees
# check (each file builds alone, what is installed, packaged and linked) is not GCC's: GCC
# compiles every file with -Werror in the main tree (-O2) and the TSan tree (-O1), clang in the
# asan tree too. The consumers below build with the default compiler (GCC) against them.
# (The libraries link libstdc++ either way.)
#   packaging_test.sh STATIC_BUILD_DIR [TREES_DIR [--build-only]]
# TREES_DIR keeps the shared and SQLite-only trees (default: a temporary folder); with
# --build-only the script only builds them (./scripts/test does so while the main tests run,
# and the checks then find them built).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
source "$src/scripts/deps.sh"  # the engine manifests (simba_engine_names)
# Every engine that can be left out but SQLite, off: the SQLite-only build.
not_sqlite=()
for engine in $(simba_engine_names); do
  [ -n "$(simba_engine_value "$engine" ENGINE_ALWAYS)" ] || [ "$engine" = sqlite ] ||
    not_sqlite+=("-DSIMBA_WITH_${engine^^}=OFF")
done
static_build=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trees=$work
if [ -n "${2:-}" ]; then
  mkdir -p "$2"
  trees=$(cd "$2" && pwd)
fi
version=$(sed -n 's/^project(simba VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
passes=0 failures=0

# check WHAT COMMAND...: runs COMMAND (quietly; its output shown if it fails).
check() {
  local what=$1
  shift
  if "$@" >"$work/out" 2>&1; then
    echo "ok: $what"
    passes=$((passes + 1))
  else
    echo "FAIL: $what"
    tail -n 40 "$work/out" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}
# beside WHAT COMMAND...: a check that keeps one core (cpack) or mostly waits (a kit run), run
# beside the next ones (the stage is the suite's last, on an otherwise idle machine); its result
# is reported by settle_beside.
beside_pids=() beside_whats=()
beside() {
  local what=$1
  shift
  "$@" >"$work/beside-${#beside_pids[@]}.out" 2>&1 &
  beside_pids+=($!)
  beside_whats+=("$what")
}
replay() { cat "$2"; return "$1"; }  # replay RC FILE: FILE's output and RC, as a check sees them
settle_beside() {
  local n rc
  for n in "${!beside_pids[@]}"; do
    wait "${beside_pids[n]}"
    rc=$?
    check "${beside_whats[n]}" replay "$rc" "$work/beside-$n.out"
  done
  beside_pids=() beside_whats=()
}
configure() { cmake -G Ninja -Wno-dev "$@" >/dev/null; }
compiler=()
if command -v clang++ >/dev/null && command -v clang >/dev/null; then
  compiler=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
fi
compiler_name=$([ ${#compiler[@]} -gt 0 ] && echo clang || echo "the default compiler")

shared=$trees/build-shared
sqlite_only=$trees/build-sqlite-only
# Shared, the Release configuration (its install names its files as a release package's) with the
# defaults plus -Werror, every file by itself as a user's default build compiles it, but at -O0:
# what this tree checks (each file builds alone, what is installed and packaged, what links)
# no optimization changes, and the main tree checks -O2's warnings (both packaging trees: 375 s
# of CPU, against 490 s at -O3).
build_shared() {
  configure -S "$src" -B "$shared" "${compiler[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-DNDEBUG -DBUILD_SHARED_LIBS=ON \
            -DSIMBA_WERROR=ON -DSIMBA_BUILD_TESTS=OFF -DSIMBA_BUILD_BENCH=OFF && cmake --build "$shared"
}
# Only the SQLite engine; a unity build at -O0 without debug information (it checks what is
# linked and refused, which no optimization changes: 46 s of CPU against 70 s in Release; the
# shared tree builds every file by itself).
build_sqlite_only() {
  configure -S "$src" -B "$sqlite_only" "${compiler[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DSIMBA_BUILD_TESTS=OFF \
            -DSIMBA_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON \
            "${not_sqlite[@]}" &&
    cmake --build "$sqlite_only" --target simba_cli
}
if [ "${3:-}" = --build-only ]; then
  build_shared && build_sqlite_only
  exit
fi

check "shared libraries (Release configuration, -O0), every file by itself, $compiler_name, -Werror" build_shared
check "install of the shared build" cmake --install "$shared" --prefix "$work/prefix-shared"
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$shared/CMakeCache.txt")
check "libsimba_core.so has the SONAME libsimba_core.so.0.2" \
  bash -c "readelf -d '$work/prefix-shared/$libdir/libsimba_core.so' | grep -q 'SONAME.*\[libsimba_core.so.${version%.*}\]'"
check "the installed simba --version says $version" \
  bash -c "'$work/prefix-shared/bin/simba' --version | grep -qx 'simba $version'"
check "the man page is installed and lists every subcommand and the exit codes" \
  bash -c "for word in lock leader schedule status watch list release SIMBA_BACKEND password_file 124 77; do
             grep -q -- \"\$word\" '$work/prefix-shared/share/man/man1/simba.1' || exit 1; done"
beside "cpack -G DEB" bash -c "cd '$shared' && cpack -G DEB"

# The static main build, installed.
check "install of the static build" cmake --install "$static_build" --prefix "$work/prefix-static"

for kind in static shared; do
  prefix=$work/prefix-$kind
  check "find_package(simba 0.2) against the $kind install: build and run" \
    bash -c "$(declare -f configure); configure -S '$src/tests/consumer' -B '$work/consumer-$kind' -DCMAKE_PREFIX_PATH='$prefix' &&
             cmake --build '$work/consumer-$kind' && '$work/consumer-$kind/consumer' 'sqlite://$work/$kind.db'"
  check "find_package(simba COMPONENTS tck) against the $kind install: the kit is installed" \
    test -x "$work/consumer-$kind/consumer_kit"
  if [ "$kind" = static ]; then  # once is enough: the same cases as tck.own_backend
    beside "... and proves the consumer's own Backend (the kit's lease groups)" \
      bash -c "'$work/consumer-$kind/consumer_kit' > '$work/consumer-kit.log' 2>&1 || { tail -n 30 '$work/consumer-kit.log'; exit 1; }"
  fi
  pc="PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name simba.pc)")"
  flags="--cflags --libs"
  check "pkg-config simba against the $kind install: build and run" \
    bash -c "g++ -o '$work/pc-$kind' '$src/tests/consumer/main.cc' \$($pc pkg-config $flags simba) -Wl,-rpath,'$prefix/$libdir' &&
             '$work/pc-$kind' 'sqlite://$work/pc-$kind.db'"
done
mkdir -p "$work/wants-v1"
printf 'cmake_minimum_required(VERSION 3.25)\nproject(wants_v1 LANGUAGES CXX)\nfind_package(simba 1.0 REQUIRED)\n' \
  >"$work/wants-v1/CMakeLists.txt"
check "find_package(simba 1.0) is refused (SameMajorVersion)" \
  bash -c "! cmake -S '$work/wants-v1' -B '$work/wants-v1/build' -DCMAKE_PREFIX_PATH='$work/prefix-static'"

check "a build with only the SQLite engine" build_sqlite_only
check "... links no other engine's client library" \
  bash -c "ldd '$sqlite_only/bin/simba'; ! ldd '$sqlite_only/bin/simba' | grep -E 'hiredis|libpq|mariadb|zookeeper'"
check "... answers a Redis URI with exit 78 naming SIMBA_WITH_REDIS" \
  bash -c "'$sqlite_only/bin/simba' status x --backend redis://127.0.0.1:6379 2>'$work/err'; rc=\$?; cat '$work/err';
           [ \$rc -eq 78 ] && grep -q 'SIMBA_WITH_REDIS=ON' '$work/err'"
check "... still locks on SQLite" \
  "$sqlite_only/bin/simba" lock --backend "sqlite://$work/only.db" m -- true

settle_beside
deb=$(ls "$shared"/simba_*.deb 2>/dev/null | head -n 1)
check "the .deb holds the CLI, the libraries, the headers and the CMake package" \
  bash -c "dpkg-deb -c '$deb' | grep -q './usr/bin/simba\$' && dpkg-deb -c '$deb' | grep -q 'libsimba_core.so.$version' &&
           dpkg-deb -c '$deb' | grep -q 'include/simba/simba.h' && dpkg-deb -c '$deb' | grep -q 'cmake/simba/simbaConfig.cmake'"
check "the .deb holds the conformance kit (simba-tck, <simba/tck/kit.h>, its CMake targets)" \
  bash -c "dpkg-deb -c '$deb' | grep -q './usr/bin/simba-tck\$' && dpkg-deb -c '$deb' | grep -q 'include/simba/tck/kit.h' &&
           dpkg-deb -c '$deb' | grep -q 'cmake/simba/simbaTckTargets.cmake'"
check "the .deb depends on each engine's client library (dpkg-shlibdeps)" \
  bash -c "deps=\$(dpkg-deb -f '$deb' Depends); echo \"Depends: \$deps\";
           for lib in libhiredis libpq5 libmariadb3 libzookeeper-mt libsqlite3 libspdlog; do
             grep -q \"\$lib\" <<<\"\$deps\" || { echo \"missing \$lib\"; exit 1; }; done"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
