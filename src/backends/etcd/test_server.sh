#!/usr/bin/env bash
# Runs a command against a throwaway etcd (Debian's `etcd-server`, one member): loopback, free
# client and peer ports of its own, a temporary data folder (in /dev/shm when there is one: a
# test server on a loaded CI disk must not stall on fsync), and a 10 ms heartbeat with a 100 ms
# election timeout, so the server grants leases as short as 1 s (its minimum is 1.5 election
# timeouts, rounded up to whole seconds); stopped afterwards whatever happens.
#   src/backends/etcd/test_server.sh COMMAND ARGS...   (every "@ETCD_URI@" and "@ETCD_PORT@" in ARGS is replaced)
# The command also finds the server in $SIMBA_TEST_ETCD_URI and $SIMBA_TEST_ETCD_PORT, and can
# restart it (same ports and data) with $SIMBA_TEST_ETCD_START (a script that starts it and
# waits until it serves; the server's pid goes to $SIMBA_TEST_ETCD_PIDFILE).
set -euo pipefail
source "$(dirname "$0")/../../../tests/server_lib.sh"
server_require src/backends/etcd/test_server.sh etcd-server command -v etcd
base=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
dir=$(mktemp -d "$base/simba-etcd.XXXXXX")
cleanup() {
  if [ -f "$dir/pid" ]; then
    local pid
    pid=$(cat "$dir/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  server_stop_matching "--data-dir $dir/data"  # one a test started again and the pid file missed
  rm -rf "$dir"
}
trap cleanup EXIT

# The start script: the server in the background, its pid in $dir/pid; waits until it serves.
cat >"$dir/start" <<EOF
#!/usr/bin/env bash
cd "$dir"
port=\$(cat "$dir/port"); peer=\$(cat "$dir/peer")
etcd --name simba-test --data-dir "$dir/data" \\
     --listen-client-urls http://127.0.0.1:\$port --advertise-client-urls http://127.0.0.1:\$port \\
     --listen-peer-urls http://127.0.0.1:\$peer --initial-advertise-peer-urls http://127.0.0.1:\$peer \\
     --initial-cluster simba-test=http://127.0.0.1:\$peer \\
     --heartbeat-interval 10 --election-timeout 100 --auth-token-ttl 1 --log-level warn --logger zap \\
     >>"$dir/server.log" 2>&1 &
echo \$! >"$dir/pid"
for _ in \$(seq 400); do
  kill -0 \$(cat "$dir/pid") 2>/dev/null || exit 1
  (exec 3<>/dev/tcp/127.0.0.1/\$port && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && timeout 1 cat <&3) 2>/dev/null \\
    | grep -q '"health":"true"' && exit 0
  sleep 0.05
done
exit 1
EOF
chmod +x "$dir/start"

started=
for attempt in $(seq 10); do
  port=$(server_random_port)
  peer=$(server_random_port)
  [ "$port" != "$peer" ] || continue
  echo "$port" >"$dir/port"
  echo "$peer" >"$dir/peer"
  rm -rf "$dir/data"
  if "$dir/start"; then started=1; break; fi
  kill "$(cat "$dir/pid")" 2>/dev/null || true
  rm -f "$dir/pid"
done
[ -n "$started" ] || { echo "src/backends/etcd/test_server.sh: etcd did not start"; cat "$dir/server.log"; exit 1; }
export SIMBA_TEST_ETCD_URI="etcd://127.0.0.1:$port" SIMBA_TEST_ETCD_PORT="$port"
export SIMBA_TEST_ETCD_START="$dir/start" SIMBA_TEST_ETCD_PIDFILE="$dir/pid"
export ETCDCTL_API=3
server_exec @ETCD_URI@ "$SIMBA_TEST_ETCD_URI" @ETCD_PORT@ "$port" "$@"
