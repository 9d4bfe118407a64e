#!/usr/bin/env bash
# Run by with_redis.sh. A JVM Simba holder (its plain SET NX PX on Simba's key) blocks
# `simba lock` and shows in `simba status`; once its lease expires, simba takes over.
set -uo pipefail
simba=${1:?usage: cli_redis_test.sh path/to/simba}
uri=${SIMBA_TEST_REDIS_URI:?run me through with_redis.sh}
port=${SIMBA_TEST_REDIS_PORT:?}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
work=$(mktemp -d)  # its own files: CLI tests run in parallel
trap 'rm -rf "$work"' EXIT
cd "$work"

redis-cli -p "$port" SET 'simba:{jvm-job}' '7:4242@jvm-host' NX PX 1500 >/dev/null
"$simba" lock --backend "$uri" --timeout 300ms jvm-job -- true 2>err.txt
rc=$?
[ "$rc" -eq 124 ] || fail "simba lock while a JVM holder owns: exit $rc, want 124"
grep -q "7:4242@jvm-host" err.txt || fail "the timeout message does not name the JVM holder: $(cat err.txt)"
"$simba" status --backend "$uri" --json jvm-job > status.json || fail "simba status failed"
grep -q '"owner":"7:4242@jvm-host"' status.json || fail "status does not show the JVM holder: $(cat status.json)"
# The JVM holder's lease (PX 1500) runs out; simba waits for it and takes over.
"$simba" lock --backend "$uri" --timeout 10s jvm-job -- sh -c 'echo "$SIMBA_FENCING_TOKEN" > token.txt' \
  || fail "simba lock after the JVM lease expired: exit $?"
[ -s token.txt ] && [ "$(cat token.txt)" -gt 0 ] || fail "no fencing token for the new owner"
# A password never shows, whatever happens.
"$simba" status --backend "redis://:hunter2@127.0.0.1:$port" jvm-job > out.txt 2>&1
! grep -q hunter2 out.txt || fail "the password appeared: $(cat out.txt)"
echo "$((4 - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
