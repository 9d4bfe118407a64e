# Sourced by scripts/demo and scripts/test: installs the Debian packages simba builds with.
# Runs apt-get only when something is missing, so a second run costs nothing.
simba_packages=(cmake ninja-build g++ pkg-config libsqlite3-dev libspdlog-dev libfmt-dev
                libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev
                libhiredis-dev redis-server libpq-dev postgresql libmariadb-dev mariadb-server
                libzookeeper-mt-dev zookeeper default-jre-headless)

simba_install_deps() {
  local missing=()
  for package in "${simba_packages[@]}" "$@"; do
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
