#!/usr/bin/env bash
# Runs a command against a throwaway redis-server: loopback, a free port of its own, a
# temporary folder, no persistence; stopped afterwards whatever happens.
#   with_redis.sh COMMAND ARGS...   (every "@REDIS_URI@" and "@REDIS_PORT@" in ARGS is replaced)
# The command also finds the server in $SIMBA_TEST_REDIS_URI and $SIMBA_TEST_REDIS_PORT.
set -euo pipefail
command -v redis-server >/dev/null || { echo "with_redis.sh: redis-server is not installed (run ./scripts/test)"; exit 1; }
dir=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; [ -n "$server" ] && wait "$server" 2>/dev/null; rm -rf "$dir"' EXIT
# A random port; if another process has it, redis-server exits and we try another.
for attempt in $(seq 20); do
  port=$((20000 + RANDOM % 40000))
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
               --daemonize no --logfile "$dir/redis.log" &
  server=$!
  for _ in $(seq 100); do
    kill -0 "$server" 2>/dev/null || break
    redis-cli -p "$port" ping >/dev/null 2>&1 && break 2
    sleep 0.05
  done
  kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; server=
done
[ -n "$server" ] || { echo "with_redis.sh: redis-server did not start"; cat "$dir/redis.log"; exit 1; }
export SIMBA_TEST_REDIS_URI="redis://127.0.0.1:$port" SIMBA_TEST_REDIS_PORT="$port"
args=()
for arg in "$@"; do
  arg=${arg//@REDIS_URI@/$SIMBA_TEST_REDIS_URI}
  args+=("${arg//@REDIS_PORT@/$port}")
done
"${args[@]}"
