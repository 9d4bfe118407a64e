#!/usr/bin/env bash
# Runs a command against a throwaway redis-server: loopback, a free port of its own, a
# temporary folder, no persistence; stopped afterwards whatever happens.
#   src/backends/redis/test_server.sh COMMAND ARGS...   (every "@REDIS_URI@" and "@REDIS_PORT@" in ARGS is replaced)
# The command also finds the server in $SIMBA_TEST_REDIS_URI and $SIMBA_TEST_REDIS_PORT.
set -euo pipefail
source "$(dirname "$0")/../../../tests/server_lib.sh"
server_require src/backends/redis/test_server.sh redis-server command -v redis-server
dir=$(mktemp -d)
server=
trap 'server_stop "$server"; rm -rf "$dir"' EXIT
# A random port; if another process has it, redis-server exits and we try another.
for attempt in $(seq 20); do
  port=$(server_random_port)
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
               --daemonize no --logfile "$dir/redis.log" &
  server=$!
  server_poll 100 "$server" redis-cli -p "$port" ping && break
  server_stop "$server"; server=
done
[ -n "$server" ] || { echo "src/backends/redis/test_server.sh: redis-server did not start"; cat "$dir/redis.log"; exit 1; }
export SIMBA_TEST_REDIS_URI="redis://127.0.0.1:$port" SIMBA_TEST_REDIS_PORT="$port"
server_exec @REDIS_URI@ "$SIMBA_TEST_REDIS_URI" @REDIS_PORT@ "$port" "$@"
