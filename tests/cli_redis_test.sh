#!/usr/bin/env bash
# Run by src/backends/redis/test_server.sh. A JVM Simba holder (its plain SET NX PX on Simba's key) blocks
# `simba lock` and shows in `simba status`; once its lease expires, simba takes over.
set -uo pipefail
simba=${1:?usage: cli_redis_test.sh path/to/simba}
uri=${SIMBA_TEST_REDIS_URI:?run me through src/backends/redis/test_server.sh}
port=${SIMBA_TEST_REDIS_PORT:?}
source "$(dirname "$0")/cli_lib.sh"

# A lease that lasts while the checks run, however slow the machine; then 500 ms are left.
redis-cli -p "$port" SET 'simba:{jvm-job}' '7:4242@jvm-host' NX PX 60000 >/dev/null
expect_held_by "$uri" jvm-job "7:4242@jvm-host"
redis-cli -p "$port" PEXPIRE 'simba:{jvm-job}' 500 >/dev/null
# The JVM holder's lease runs out; simba waits for it and takes over.
"$simba" lock --backend "$uri" --timeout 10s jvm-job -- sh -c 'echo "$SIMBA_FENCING_TOKEN" > token.txt' \
  || fail "simba lock after the JVM lease expired: exit $?"
[ -s token.txt ] && [ "$(cat token.txt)" -gt 0 ] || fail "no fencing token for the new owner"
# A password never shows, whatever happens.
expect_secret_hidden "redis://:hunter2@127.0.0.1:$port" jvm-job hunter2
finish
