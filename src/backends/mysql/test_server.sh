#!/usr/bin/env bash
# Runs a command against a throwaway MariaDB: loopback, a free port of its own, a data folder
# in a temporary directory, stopped afterwards whatever happens. A user `simba` (password
# `simba-pw`) owns a database `simba`; the anonymous users mariadb-install-db creates are
# dropped (they would shadow 'simba'@'%' from 127.0.0.1).
#   src/backends/mysql/test_server.sh COMMAND ARGS...   (every "@MYSQL_URI@" and "@MYSQL_PORT@" in ARGS is replaced)
# The command also finds the server in $SIMBA_TEST_MYSQL_URI, $SIMBA_TEST_MYSQL_PORT and
# $SIMBA_TEST_MYSQL_START (a command line that starts the server again, for restart tests).
# With SIMBA_TEST_TLS=1 the server has a certificate from a throwaway CA (server_make_tls) and
# user `simba` must connect with TLS; "@TLS_CA@" and "@TLS_WRONG_CA@" in ARGS are replaced.
set -euo pipefail
source "$(dirname "$0")/../../../tests/server_lib.sh"
mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
server_require src/backends/mysql/test_server.sh mariadb-server test -x "$mariadbd"
dir=$(mktemp -d)
server=
stop() {
  server_stop "$server"
  # A server the test started again (SIMBA_TEST_MYSQL_START) is no child of ours: it must be
  # gone before its folder goes (a repeat run saw rm fail on a data folder still written to).
  server_stop_matching "--datadir=$dir/data"
  rm -rf "$dir"
}
trap stop EXIT
# A temporary folder of its own: a starting server deletes the "#sql*" files it finds in its
# tmpdir, which would be another server's (or install's) when several run at once in /tmp.
mkdir "$dir/tmp"
mariadb-install-db --no-defaults --datadir="$dir/data" --tmpdir="$dir/tmp" --user="$(id -un)" --auth-root-authentication-method=normal \
  >"$dir/install.log" 2>&1 || { cat "$dir/install.log"; exit 1; }
tls_options=
require=
if [ "${SIMBA_TEST_TLS:-}" = 1 ]; then
  server_make_tls "$dir/tls"
  tls_options="--ssl-ca=$dir/tls/ca.pem --ssl-cert=$dir/tls/server.pem --ssl-key=$dir/tls/server.key"
  require=" REQUIRE SSL"
fi
started=
for attempt in $(seq 20); do
  port=$(server_random_port)
  start="$mariadbd --no-defaults --datadir=$dir/data --tmpdir=$dir/tmp --socket=$dir/mysqld.sock --port=$port --bind-address=127.0.0.1 --user=$(id -un) --skip-log-error --innodb-flush-log-at-trx-commit=2 --innodb-buffer-pool-size=64M $tls_options"
  $start >"$dir/server.log" 2>&1 &
  server=$!
  if server_poll 200 "$server" mariadb-admin --no-defaults -S "$dir/mysqld.sock" -u root ping; then
    started=1
    break
  fi
  server_stop "$server"; server=
done
[ -n "$started" ] || { echo "src/backends/mysql/test_server.sh: MariaDB did not start"; cat "$dir/server.log"; exit 1; }
mariadb --no-defaults -S "$dir/mysqld.sock" -u root <<SQL
DELETE FROM mysql.global_priv WHERE User = '';
FLUSH PRIVILEGES;
CREATE DATABASE simba;
CREATE USER 'simba'@'%' IDENTIFIED BY 'simba-pw'$require;
GRANT ALL ON simba.* TO 'simba'@'%';
SQL
export SIMBA_TEST_MYSQL_URI="mysql://simba:simba-pw@127.0.0.1:$port/simba" SIMBA_TEST_MYSQL_PORT="$port" \
       SIMBA_TEST_MYSQL_START="$start" SIMBA_TEST_MYSQL_SOCKET="$dir/mysqld.sock"
server_exec @MYSQL_URI@ "$SIMBA_TEST_MYSQL_URI" @MYSQL_PORT@ "$port" "$@"
