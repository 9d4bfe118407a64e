#!/usr/bin/env bash
# Runs a command against a throwaway MariaDB: loopback, a free port of its own, a data folder
# in a temporary directory, stopped afterwards whatever happens. A user `simba` (password
# `simba-pw`) owns a database `simba`; the anonymous users mariadb-install-db creates are
# dropped (they would shadow 'simba'@'%' from 127.0.0.1).
#   with_mariadb.sh COMMAND ARGS...   (every "@MYSQL_URI@" and "@MYSQL_PORT@" in ARGS is replaced)
# The command also finds the server in $SIMBA_TEST_MYSQL_URI, $SIMBA_TEST_MYSQL_PORT and
# $SIMBA_TEST_MYSQL_START (a command line that starts the server again, for restart tests).
set -euo pipefail
command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || { echo "with_mariadb.sh: mariadb-server is not installed (run ./scripts/test)"; exit 1; }
mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
dir=$(mktemp -d)
server=
stop() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  pkill -f -- "--datadir=$dir/data" 2>/dev/null || true
  rm -rf "$dir"
}
trap stop EXIT
mariadb-install-db --no-defaults --datadir="$dir/data" --user="$(id -un)" --auth-root-authentication-method=normal \
  >"$dir/install.log" 2>&1 || { cat "$dir/install.log"; exit 1; }
started=
for attempt in $(seq 20); do
  port=$((20000 + RANDOM % 40000))
  start="$mariadbd --no-defaults --datadir=$dir/data --socket=$dir/mysqld.sock --port=$port --bind-address=127.0.0.1 --user=$(id -un) --skip-log-error --innodb-flush-log-at-trx-commit=2 --innodb-buffer-pool-size=64M"
  $start >"$dir/server.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    kill -0 "$server" 2>/dev/null || break
    mariadb-admin --no-defaults -S "$dir/mysqld.sock" -u root ping >/dev/null 2>&1 && { started=1; break 2; }
    sleep 0.05
  done
  kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; server=
done
[ -n "$started" ] || { echo "with_mariadb.sh: MariaDB did not start"; cat "$dir/server.log"; exit 1; }
mariadb --no-defaults -S "$dir/mysqld.sock" -u root <<'SQL'
DELETE FROM mysql.global_priv WHERE User = '';
FLUSH PRIVILEGES;
CREATE DATABASE simba;
CREATE USER 'simba'@'%' IDENTIFIED BY 'simba-pw';
GRANT ALL ON simba.* TO 'simba'@'%';
SQL
export SIMBA_TEST_MYSQL_URI="mysql://simba:simba-pw@127.0.0.1:$port/simba" SIMBA_TEST_MYSQL_PORT="$port" \
       SIMBA_TEST_MYSQL_START="$start" SIMBA_TEST_MYSQL_SOCKET="$dir/mysqld.sock"
args=()
for arg in "$@"; do
  arg=${arg//@MYSQL_URI@/$SIMBA_TEST_MYSQL_URI}
  args+=("${arg//@MYSQL_PORT@/$port}")
done
"${args[@]}"
