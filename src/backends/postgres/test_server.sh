#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL: loopback, a free port of its own, a data
# folder in a temporary directory, stopped afterwards whatever happens. PostgreSQL refuses to
# run as root, so the server runs as the `postgres` user. A role `simba` (password `simba-pw`)
# owns a database `simba`, reached with password authentication over TCP.
#   src/backends/postgres/test_server.sh COMMAND ARGS...   (every "@PG_URI@" and "@PG_PORT@" in ARGS is replaced)
# The command also finds the server in $SIMBA_TEST_PG_URI, $SIMBA_TEST_PG_PORT, $SIMBA_TEST_PG_BIN
# and $SIMBA_TEST_PG_DATA (for tests that restart it: see pg_ctl below).
# With SIMBA_TEST_TLS=1 the server takes TLS connections only (a throwaway CA, see
# server_make_tls; "@TLS_CA@" and "@TLS_WRONG_CA@" in ARGS are replaced by its files).
set -euo pipefail
source "$(dirname "$0")/../../../tests/server_lib.sh"
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
server_require src/backends/postgres/test_server.sh PostgreSQL test -x "$bin/initdb"
as_postgres() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
dir=$(mktemp -d)
chmod 755 "$dir"
[ "$(id -u)" -eq 0 ] && chown postgres "$dir"
data="$dir/data"
stop() {
  as_postgres "$bin/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT
as_postgres "$bin/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=scram-sha-256 >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log"; exit 1; }
# Statements slower than a second and lock waits longer than one go to the server's log, and a
# failing command prints them (server_on_failure), so a timeout in a test shows whether the
# server was slow at that one statement or at every statement at once.
printf '%s\n' "log_min_duration_statement = 1000" "log_lock_waits = on" >>"$data/postgresql.conf"
server_on_failure() {
  local log="$dir/server.log" lines
  [ -f "$log" ] || return 0
  lines=$(grep -E "LOG:  (duration: |process [0-9]+ (still waiting|acquired))" "$log" | cut -c1-200 || true)
  if [ -z "$lines" ]; then
    echo "src/backends/postgres/test_server.sh: no statement took over 1 s, no lock wait over 1 s (server.log)"
  else
    echo "src/backends/postgres/test_server.sh: statements over 1 s and lock waits over 1 s (server.log, at most 40):"
    printf '%s\n' "$lines" | head -n 40
  fi
}
tls_options=
if [ "${SIMBA_TEST_TLS:-}" = 1 ]; then
  server_make_tls "$dir/tls"
  [ "$(id -u)" -eq 0 ] && chown -R postgres "$dir/tls"
  # TCP clients must use TLS: "hostssl" lines only.
  sed -i -E 's/^host(\s)/hostssl\1/' "$data/pg_hba.conf"
  tls_options="-c ssl=on -c ssl_cert_file=$dir/tls/server.pem -c ssl_key_file=$dir/tls/server.key"
fi
started=
for attempt in $(seq 20); do
  port=$(server_random_port)
  if as_postgres "$bin/pg_ctl" -D "$data" -w -t 30 -l "$dir/server.log" \
       -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off $tls_options" start >/dev/null 2>&1; then
    started=1
    break
  fi
done
[ -n "$started" ] || { echo "src/backends/postgres/test_server.sh: PostgreSQL did not start"; cat "$dir/server.log"; exit 1; }
as_postgres "$bin/psql" -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
  -c "CREATE ROLE simba LOGIN PASSWORD 'simba-pw'" -c "CREATE DATABASE simba OWNER simba" >/dev/null
export SIMBA_TEST_PG_URI="postgresql://simba:simba-pw@127.0.0.1:$port/simba" SIMBA_TEST_PG_PORT="$port" \
       SIMBA_TEST_PG_BIN="$bin" SIMBA_TEST_PG_DATA="$data" SIMBA_TEST_PG_SOCKET_DIR="$dir"
server_exec @PG_URI@ "$SIMBA_TEST_PG_URI" @PG_PORT@ "$port" "$@"
