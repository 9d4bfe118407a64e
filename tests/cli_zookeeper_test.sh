#!/usr/bin/env bash
# Run by src/backends/zookeeper/test_server.sh. A `simba lock` holder is seen by name from another process
# (`simba status`, a blocked `simba lock`), and its release or death frees the mutex.
set -uo pipefail
simba=${1:?usage: cli_zookeeper_test.sh path/to/simba}
uri="${SIMBA_TEST_ZK_URI:?run me through src/backends/zookeeper/test_server.sh}?session_timeout=2s"
source "$(dirname "$0")/cli_lib.sh"
mutex="cli/zk-$$-$RANDOM"

set -m  # background jobs get process groups of their own: the kill below takes the holder's child too
"$simba" lock --backend "$uri" "$mutex" -- sleep 30 &
holder=$!
set +m
for _ in $(seq 100); do
  "$simba" status --backend "$uri" --json "$mutex" > status.json 2>/dev/null && grep -q "\"owner\":\"[^\"]*:$holder@" status.json && break
  sleep 0.1
done
expect_held_by "$uri" "$mutex" "[^\"]*:$holder@"
grep -q '"fencing_token":[1-9]' status.json || fail "status shows no fencing token: $(cat status.json)"
kill -9 -- "-$holder"
wait "$holder" 2>/dev/null
# The holder's session ends within 2 s (short enough to wait for, long enough for a loaded
# machine to keep it while the holder lives); the next lock gets a larger token.
"$simba" lock --backend "$uri" --timeout 5s "$mutex" -- sh -c 'echo "$SIMBA_FENCING_TOKEN" > token.txt' \
  || fail "simba lock after the holder was killed: exit $?"
first=$(grep -o '"fencing_token":[0-9]*' status.json | cut -d: -f2)
[ -s token.txt ] && [ "$(cat token.txt)" -gt "${first:-0}" ] || fail "token $(cat token.txt) not above the killed holder's ${first:-?}"
"$simba" status --backend "$uri" --json "$mutex" > status.json || fail "simba status of a free mutex failed"
grep -q '"owner":""\|"owner":null' status.json || fail "a free mutex shows an owner: $(cat status.json)"
finish
