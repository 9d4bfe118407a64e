#!/usr/bin/env bash
# Run by with_mariadb.sh. A row written by a JVM Simba contender (Simba's own INSERT and
# UPDATE shapes) blocks `simba lock` and shows in `simba status`; once its lease expires, simba
# takes over and the row gets a fencing token.
set -uo pipefail
simba=${1:?usage: cli_mysql_test.sh path/to/simba}
uri=${SIMBA_TEST_MYSQL_URI:?run me through with_mariadb.sh}
sql() { mariadb --no-defaults -h 127.0.0.1 -P "$SIMBA_TEST_MYSQL_PORT" -u simba -psimba-pw simba -N -e "$1"; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
work=$(mktemp -d)  # its own files: CLI tests run in parallel
trap 'rm -rf "$work"' EXIT
cd "$work"

"$simba" status --backend "$uri" --json setup >/dev/null || fail "simba could not create its table"
now="(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
sql "INSERT INTO simba_mutex (mutex) VALUES ('jvm-job')" || fail "Simba's insert (without our column) failed"
sql "UPDATE simba_mutex SET acquired_at = $now, ttl_at = $now + 1000, transition_at = $now + 1500,
       owner_id = '7:4242@jvm-host', version = version + 1
     WHERE mutex = 'jvm-job' AND (transition_at < $now OR (owner_id = '7:4242@jvm-host' AND transition_at > $now))"
"$simba" lock --backend "$uri" --timeout 300ms jvm-job -- true 2>err.txt
rc=$?
[ "$rc" -eq 124 ] || fail "simba lock while a JVM holder owns: exit $rc, want 124"
grep -q "7:4242@jvm-host" err.txt || fail "the timeout message does not name the JVM holder: $(cat err.txt)"
"$simba" status --backend "$uri" --json jvm-job > status.json || fail "simba status failed"
grep -q '"owner":"7:4242@jvm-host"' status.json || fail "status does not show the JVM holder: $(cat status.json)"
"$simba" lock --backend "$uri" --timeout 10s jvm-job -- sh -c 'echo "$SIMBA_FENCING_TOKEN" > token.txt' \
  || fail "simba lock after the JVM lease expired: exit $?"
[ "$(cat token.txt 2>/dev/null)" = 1 ] || fail "the first simba owner of a JVM row should get token 1, got $(cat token.txt)"
"$simba" status --backend "mysql://simba:hunter2@127.0.0.1:$SIMBA_TEST_MYSQL_PORT/simba" jvm-job > out.txt 2>&1
! grep -q hunter2 out.txt || fail "the password appeared: $(cat out.txt)"
echo "$((6 - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
