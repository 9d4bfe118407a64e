#!/usr/bin/env bash
# Run by src/backends/mysql/test_server.sh. A `simba_mutex` table made by Simba's own DDL (no fencing_token
# column, the server's default collation), then four `simba lock` processes starting at once:
# each may find our column missing and add it; all must succeed, one holder at a time, and the
# collation warning is said once on this host, not by every process.
set -uo pipefail
simba=${1:?usage: cli_mysql_simba_table_test.sh path/to/simba}
uri=${SIMBA_TEST_MYSQL_URI:?run me through src/backends/mysql/test_server.sh}
sql() { mariadb --no-defaults -h 127.0.0.1 -P "$SIMBA_TEST_MYSQL_PORT" -u simba -psimba-pw simba -N -e "$1"; }
source "$(dirname "$0")/cli_lib.sh"
export XDG_STATE_HOME=$work/state  # where the once-per-host warning is remembered

sql "CREATE TABLE simba_mutex (
       mutex varchar(66) NOT NULL PRIMARY KEY, acquired_at bigint unsigned NOT NULL,
       ttl_at bigint unsigned NOT NULL, transition_at bigint unsigned NOT NULL,
       owner_id varchar(128) NOT NULL, version int unsigned NOT NULL)" || fail "Simba's DDL failed"
# A reader holds the table for a second, so every process finds the column missing before any
# ALTER can run: they all queue behind the reader's metadata lock, then add it at once.
sql "START TRANSACTION; SELECT COUNT(*) FROM simba_mutex; DO SLEEP(1); COMMIT" >/dev/null &
reader=$!
sleep 0.2
pids=()
for i in 1 2 3 4; do
  "$simba" lock --backend "$uri" --timeout 20s start-race -- \
    sh -c 'echo "$(date +%s%3N) start"; sleep 0.2; echo "$(date +%s%3N) end"' >"out.$i" 2>"err.$i" &
  pids+=($!)
done
wait "$reader"
for i in 1 2 3 4; do
  wait "${pids[$((i - 1))]}" || fail "simba lock $i exited $?: $(cat "err.$i")"
done
# One holder at a time: sorted by time, starts and ends alternate.
sort -n out.* | awk '{ print $2 }' | tr '\n' ' ' | grep -qx '\(start end \)\{4\}' \
  || fail "holders overlapped or some never held: $(sort -n out.* | tr '\n' ' ')"
[ "$(sql "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = 'simba'
           AND table_name = 'simba_mutex' AND column_name = 'fencing_token'")" = 1 ] || fail "no fencing_token column"
warnings=$(cat err.* | grep -c "compares mutex names" || true)
[ "$warnings" -eq 1 ] || fail "the collation warning was said $warnings times by four processes, want once: $(cat err.*)"
"$simba" status --backend "$uri" start-race 2>err.5 >/dev/null || fail "simba status failed"
! grep -q "compares mutex names" err.5 || fail "the collation warning came again on this host"
SIMBA_LOG=info "$simba" status --backend "$uri" start-race 2>err.6 >/dev/null
grep -q "compares mutex names" err.6 || fail "SIMBA_LOG=info does not show the collation note"
finish
