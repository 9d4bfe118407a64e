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

# Nor in any answer of --http (a simba leader: it stays up when its lease goes): a user of its own
# with a password, its answers while the backend
# answers, then after the user is deleted (its connections closed, the next AUTH refused).
redis-cli -p "$port" ACL SETUSER simba-http on '>hunter3' '~*' '&*' '+@all' >/dev/null
"$simba" leader --backend "redis://simba-http:hunter3@127.0.0.1:$port" --http 127.0.0.1:0 http-secret -- sleep 30 \
  2>http.err &
http_pid=$!
http_port=""
for ((i = 0; i < 250; i++)); do
  http_port=$(grep -o 'serving http://127.0.0.1:[0-9]*' http.err 2>/dev/null | grep -o '[0-9]*$') && [ -n "$http_port" ] && break
  sleep 0.02
done
if [ -z "$http_port" ]; then
  fail "simba leader --http never served: $(cat http.err)"
else
  for path in /metrics /healthz /leader /nope; do curl -s -m 5 -i "http://127.0.0.1:$http_port$path"; done > answers.txt
  redis-cli -p "$port" ACL DELUSER simba-http >/dev/null
  for ((i = 0; i < 100; i++)); do
    [ "$(curl -s -m 5 -o healthz.txt -w '%{http_code}' "http://127.0.0.1:$http_port/healthz")" = 503 ] && break
    sleep 0.05
  done
  grep -q '^unavailable: ' healthz.txt || fail "/healthz after the user went: $(cat healthz.txt)"
  cat healthz.txt >> answers.txt
  grep -q 'simba_leader{mutex="http-secret"} 1' answers.txt || fail "--http did not answer as leader: $(head -c 300 answers.txt)"
  ! grep -q hunter3 answers.txt http.err || fail "the password appeared in an --http answer or message"
fi
kill "$http_pid" 2>/dev/null
wait "$http_pid" 2>/dev/null
finish
