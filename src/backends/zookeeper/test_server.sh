#!/usr/bin/env bash
# Runs a command against a throwaway ZooKeeper server (Debian's `zookeeper` package, standalone):
# loopback, a free port of its own, a temporary data folder, tickTime 100 ms so sessions may
# be as short as 200 ms, and no fsync per write (as fsync=off for PostgreSQL: a test server
# under a loaded CI disk must not stall renewals); stopped afterwards whatever happens.
#   src/backends/zookeeper/test_server.sh COMMAND ARGS...   (every "@ZK_URI@" and "@ZK_PORT@" in ARGS is replaced)
# The command also finds the server in $SIMBA_TEST_ZK_URI and $SIMBA_TEST_ZK_PORT, and can
# restart it (same port and data) with $SIMBA_TEST_ZK_START (a script that starts it and
# waits until it serves; the server's pid goes to $SIMBA_TEST_ZK_PIDFILE).
set -euo pipefail
source "$(dirname "$0")/../../../tests/server_lib.sh"
server_require src/backends/zookeeper/test_server.sh zookeeper test -f /usr/share/java/zookeeper.jar
server_require src/backends/zookeeper/test_server.sh java command -v java
dir=$(mktemp -d)
cleanup() {
  if [ -f "$dir/pid" ]; then
    local pid
    pid=$(cat "$dir/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  server_stop_matching "$dir/zoo.cfg"  # a JVM started for this folder that the pid file missed
  rm -rf "$dir"
}
trap cleanup EXIT

ruok() { [ "$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf ruok >&3 && timeout 1 cat <&3) 2>/dev/null)" = imok ]; }

# The start script: the server in the background, its pid in $dir/pid; waits until it serves.
# The JVM compiles with C1 only (TieredStopAtLevel=1): a test server lives a minute or two, too
# short for C2's compiles to pay for themselves (the kit's run: the server's CPU 28-30 s with
# both compilers, 23-24 s with C1 alone, measured in turn).
cat >"$dir/start" <<EOF
#!/usr/bin/env bash
cd "$dir"
java -Xms64m -Xmx1g -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dzookeeper.log.dir="$dir" -Dzookeeper.root.logger=WARN,CONSOLE \\
     -Dlog4j.configuration=file:/etc/zookeeper/conf/log4j.properties \\
     -cp "/usr/share/java/*:/etc/zookeeper/conf" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \\
     >>"$dir/server.log" 2>&1 &
echo \$! >"$dir/pid"
for _ in \$(seq 400); do
  kill -0 \$(cat "$dir/pid") 2>/dev/null || exit 1
  # "ruok" answers before the server serves; "stat" names its mode only once it does.
  (exec 3<>/dev/tcp/127.0.0.1/\$(cat "$dir/port") && printf stat >&3 && timeout 1 cat <&3) 2>/dev/null | grep -q '^Mode:' && exit 0
  sleep 0.05
done
exit 1
EOF
chmod +x "$dir/start"

started=
for attempt in $(seq 10); do
  port=$(server_random_port)
  ruok "$port" && continue  # someone else's server
  echo "$port" >"$dir/port"
  mkdir -p "$dir/data"
  cat >"$dir/zoo.cfg" <<EOF
tickTime=100
minSessionTimeout=200
maxSessionTimeout=60000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,stat,cons
forceSync=no
EOF
  if "$dir/start"; then started=1; break; fi
  kill "$(cat "$dir/pid")" 2>/dev/null || true
  rm -f "$dir/pid"
done
[ -n "$started" ] || { echo "src/backends/zookeeper/test_server.sh: zookeeper did not start"; cat "$dir/server.log"; exit 1; }
export SIMBA_TEST_ZK_URI="zookeeper://127.0.0.1:$port" SIMBA_TEST_ZK_PORT="$port"
export SIMBA_TEST_ZK_START="$dir/start" SIMBA_TEST_ZK_PIDFILE="$dir/pid"
server_exec @ZK_URI@ "$SIMBA_TEST_ZK_URI" @ZK_PORT@ "$port" "$@"
