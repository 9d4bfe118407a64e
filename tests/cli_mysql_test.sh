#!/usr/bin/env bash
# Run by src/backends/mysql/test_server.sh. A row written by a JVM Simba contender (Simba's own INSERT and
# UPDATE shapes) blocks `simba lock` and shows in `simba status`; once its lease expires, simba
# takes over and the row gets a fencing token.
set -uo pipefail
simba=${1:?usage: cli_mysql_test.sh path/to/simba}
uri=${SIMBA_TEST_MYSQL_URI:?run me through src/backends/mysql/test_server.sh}
sql() { mariadb --no-defaults -h 127.0.0.1 -P "$SIMBA_TEST_MYSQL_PORT" -u simba -psimba-pw simba -N -e "$1"; }
source "$(dirname "$0")/cli_lib.sh"

"$simba" status --backend "$uri" --json setup >/dev/null || fail "simba could not create its table"
now="(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
sql "INSERT INTO simba_mutex (mutex) VALUES ('jvm-job')" || fail "Simba's insert (without our column) failed"
# A lease that lasts while the checks run, however slow the machine; then the JVM holder's
# last renewal leaves it 500 ms, and simba waits that out.
sql "UPDATE simba_mutex SET acquired_at = $now, ttl_at = $now + 60000, transition_at = $now + 60500,
       owner_id = '7:4242@jvm-host', version = version + 1
     WHERE mutex = 'jvm-job' AND (transition_at < $now OR (owner_id = '7:4242@jvm-host' AND transition_at > $now))"
expect_held_by "$uri" jvm-job "7:4242@jvm-host"
sql "UPDATE simba_mutex SET ttl_at = $now, transition_at = $now + 500, version = version + 1
     WHERE mutex = 'jvm-job' AND owner_id = '7:4242@jvm-host' AND transition_at > $now"
"$simba" lock --backend "$uri" --timeout 10s jvm-job -- sh -c 'echo "$SIMBA_FENCING_TOKEN" > token.txt' \
  || fail "simba lock after the JVM lease expired: exit $?"
[ "$(cat token.txt 2>/dev/null)" = 1 ] || fail "the first simba owner of a JVM row should get token 1, got $(cat token.txt)"
expect_secret_hidden "mysql://simba:hunter2@127.0.0.1:$SIMBA_TEST_MYSQL_PORT/simba" jvm-job hunter2
# That password is wrong: refused credentials have their own exit code, not "unreachable".
# (From password_file, so no warning about a password on the command line.)
echo hunter2 > wrong.pw
"$simba" status --backend "mysql://simba@127.0.0.1:$SIMBA_TEST_MYSQL_PORT/simba?password_file=$PWD/wrong.pw" jvm-job > out.txt 2>&1
rc=$?
[ "$rc" -eq 77 ] || fail "a refused password should exit 77, got $rc"
[ "$(wc -l < out.txt)" -eq 1 ] || fail "a refused password should print one line: $(cat out.txt)"
! grep -q hunter2 out.txt || fail "the password from password_file appeared: $(cat out.txt)"
# The right one from a file works, with no warning.
echo simba-pw > right.pw
"$simba" status --backend "mysql://simba@127.0.0.1:$SIMBA_TEST_MYSQL_PORT/simba?password_file=$PWD/right.pw" jvm-job \
  > out.txt 2> err.txt || fail "password_file with the right password: exit $?: $(cat err.txt)"
[ ! -s err.txt ] || fail "password_file: want no warning, got: $(cat err.txt)"
# A password in --backend works too, with one warning that ps shows it.
"$simba" status --backend "mysql://simba:simba-pw@127.0.0.1:$SIMBA_TEST_MYSQL_PORT/simba" jvm-job > out.txt 2> err.txt \
  || fail "a password in --backend: exit $?"
[ "$(grep -c 'visible to every user' err.txt)" -eq 1 ] || fail "want one warning about ps: $(cat err.txt)"
finish
