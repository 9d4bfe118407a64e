# Sourced by scripts/demo and scripts/test: installs the Debian packages simba builds with.
# Runs apt-get only when something is missing, so a second run costs nothing.

simba_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# simba_engine_values KEY: the values of KEY in every engine's manifest
# (src/backends/<name>/engine.env), space-separated.
simba_engine_values() {
  local manifest
  for manifest in "$simba_root"/src/backends/*/engine.env; do
    (source "$manifest" && printf '%s ' "${!1:-}")
  done
}
# simba_engine_names: every engine folder with a manifest, in their ENGINE_ORDER (as the build
# orders them); simba_engine_value NAME KEY: one value.
simba_engine_names() {
  local manifest
  for manifest in "$simba_root"/src/backends/*/engine.env; do
    printf '%s %s\n' "$(source "$manifest" && printf '%s' "${ENGINE_ORDER:-0}")" "$(basename "$(dirname "$manifest")")"
  done | sort -n | cut -d' ' -f2
}
simba_engine_value() { (source "$simba_root/src/backends/$1/engine.env" && printf '%s' "${!2:-}"); }

# The CLI on the embedded SQLite engine: what ./scripts/demo needs.
# (Unquoted $(...): a manifest's value is a space-separated list of package names.)
simba_sqlite_packages=(cmake ninja-build g++ pkg-config libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
                       libcpp-httplib-dev $(simba_engine_value sqlite ENGINE_BUILD_PACKAGES))
# Everything ./scripts/test needs on top: GoogleTest, standalone Asio (simba/asio.h), every engine's client library
# and server (their manifests' ENGINE_BUILD_PACKAGES and ENGINE_SERVER_PACKAGES), clang (the build is checked with it
# too), clang-format (the format stage), dpkg-dev (cpack's dpkg-shlibdeps), openssl (the TLS runs' throwaway CA),
# procps (the process tests' ps, pgrep, pkill), prometheus (its server and promtool) with curl for the --http test,
# and gdb (a test program that hangs prints every thread's stack: tests/hang_report.cc).
# The CLI's --http endpoint needs cpp-httplib (libcpp-httplib-dev), so ./scripts/demo installs it too.
# Split in two: what the main build needs, and what only the tests and the later trees need
# (the servers, clang, cpack's tools), which ./scripts/test installs while it builds.
simba_build_packages=(libgtest-dev libgmock-dev libasio-dev help2man clang-format
                      $(simba_engine_values ENGINE_BUILD_PACKAGES))
simba_server_packages=($(simba_engine_values ENGINE_SERVER_PACKAGES) clang dpkg-dev file openssl procps
                       prometheus curl gdb)
simba_test_packages=("${simba_build_packages[@]}" "${simba_server_packages[@]}")

# simba_install PACKAGE...: installs those that are missing.
simba_install() {
  local missing=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if ((${#missing[@]})); then
    echo "simba: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

simba_install_demo_deps() { simba_install "${simba_sqlite_packages[@]}"; }
simba_install_deps() { simba_install "${simba_sqlite_packages[@]}" "${simba_test_packages[@]}"; }
