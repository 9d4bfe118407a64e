# What the src/backends/*/test_server.sh wrappers share; sourced by them. Each wrapper starts one throwaway
# server on loopback, on a free port, in a temporary folder, and stops it whatever happens.

# server_require WRAPPER WHAT CHECK...: exits 1 unless CHECK succeeds ("WHAT is not installed").
server_require() {
  local wrapper=$1 what=$2
  shift 2
  "$@" >/dev/null 2>&1 || { echo "$wrapper: $what is not installed (run ./scripts/test)"; exit 1; }
}

# A random port from 20000 up to the kernel's ephemeral range (a server that finds it taken
# fails, and the wrapper tries another). Below that range no outgoing connection takes the port
# while a test has its server down, and a probe's connect never meets itself (a loopback
# connect to a port inside the range can get that same port as its source, and succeed).
server_random_port() {
  local low=32768 _
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  if ((low - 20000 > 1000)); then echo $((20000 + RANDOM % (low - 20000))); else echo $((20000 + RANDOM % 40000)); fi
}

# server_poll TRIES PID CHECK...: runs CHECK every 50 ms, at most TRIES times, while process
# PID lives; succeeds as soon as CHECK does.
server_poll() {
  local tries=$1 pid=$2 _
  shift 2
  for _ in $(seq "$tries"); do
    kill -0 "$pid" 2>/dev/null || return 1
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  return 1
}

# server_stop PID: stops a server started in the background and waits for it.
server_stop() {
  [ -n "${1:-}" ] || return 0
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# server_stop_matching PATTERN: stops the processes whose command line matches PATTERN (a
# server a test started again, which is no child of the wrapper) and waits until they are
# gone (SIGKILL after 10 s), so that their folder can be removed.
server_stop_matching() {
  pkill -f -- "$1" 2>/dev/null || return 0
  local _
  for _ in $(seq 200); do
    pgrep -f -- "$1" >/dev/null 2>&1 || return 0
    sleep 0.05
  done
  pkill -KILL -f -- "$1" 2>/dev/null || true
  for _ in $(seq 100); do
    pgrep -f -- "$1" >/dev/null 2>&1 || return 0
    sleep 0.05
  done
}

# server_exec URI_PLACEHOLDER URI PORT_PLACEHOLDER PORT COMMAND ARGS...: runs the command with
# both placeholders (and the TLS ones, after server_make_tls) replaced in every argument. If it
# fails, says how this machine's CPU time went while it ran (server_cpu_report) and calls the
# wrapper's server_on_failure, if it defines one (PostgreSQL: its slow statements), so that a
# failure under load tells a stalled machine from a stalled server. Exits with its status.
server_exec() {
  local cpu_log
  cpu_log=$(mktemp)
  # One line a second: the wall clock and the CPU counters, read by bash itself (no process
  # forked but sleep); ends with the wrapper.
  (LC_ALL=C  # a point in $EPOCHREALTIME whatever the locale
   while kill -0 $$ 2>/dev/null; do
     read -r cpu_line </proc/stat
     echo "$EPOCHREALTIME $cpu_line"
     sleep 1
   done) >"$cpu_log" 2>/dev/null &
  local sampler=$! rc=0
  server_exec_now "$@" || rc=$?
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    echo "${0#"$PWD/"}: the command failed (exit $rc); while it ran: $(server_cpu_report "$cpu_log")"
    if declare -F server_on_failure >/dev/null; then server_on_failure || true; fi
  fi
  rm -f "$cpu_log"
  return "$rc"
}

# server_cpu_report CPU_LOG: of the CPU time between the first and the last line of server_exec's
# samples, the share busy, waiting for I/O and stolen by the host, and every second-long sample
# that took over 2 s of wall clock or lost over a quarter of its CPU time to the host or to I/O
# (the first 20, by their start from the first sample).
server_cpu_report() {
  awk '
    { t = $1; total = 0; for (i = 3; i <= 10; i++) total += $i
      busy = $3 + $4 + $5 + $8 + $9; io = $7; steal = $10 }
    NR == 1 { t0 = t; total0 = total; busy0 = busy; io0 = io; steal0 = steal }
    NR > 1 && total > ptotal {
      d = total - ptotal
      if ((t - pt > 2 || (steal - psteal) / d > 0.25 || (io - pio) / d > 0.25) && ++nslow <= 20)
        slow = slow sprintf(" [at +%.0f s: %.1f s, steal %.0f%%, iowait %.0f%%]", pt - t0, t - pt,
                            100 * (steal - psteal) / d, 100 * (io - pio) / d)
    }
    { pt = t; ptotal = total; pio = io; psteal = steal }
    END {
      d = total - total0
      if (NR < 2 || d <= 0) { print "too short to sample"; exit }
      printf "%.0f s, busy %.0f%%, iowait %.0f%%, steal %.0f%% of the CPU time; slow seconds (%d):%s\n", t - t0,
             100 * (busy - busy0) / d, 100 * (io - io0) / d, 100 * (steal - steal0) / d, nslow, slow
    }' "$1"
}

# server_exec_now: server_exec's command itself, its placeholders replaced.
server_exec_now() {
  local uri_key=$1 uri=$2 port_key=$3 port=$4 arg
  shift 4
  local args=()
  for arg in "$@"; do
    arg=${arg//$uri_key/$uri}
    if [ -n "$server_tls" ]; then
      arg=${arg//@TLS_CA@/$server_tls/ca.pem}
      arg=${arg//@TLS_WRONG_CA@/$server_tls/wrong-ca.pem}
    fi
    args+=("${arg//$port_key/$port}")
  done
  "${args[@]}"
}

# server_make_tls DIR: a throwaway CA (DIR/ca.pem) and a server certificate it signed for
# 127.0.0.1 and localhost (DIR/server.pem, DIR/server.key), plus another CA that signed
# nothing here (DIR/wrong-ca.pem), for the TLS runs (SIMBA_TEST_TLS=1); server_exec then
# replaces "@TLS_CA@" and "@TLS_WRONG_CA@" with the two CA files.
server_tls=
server_make_tls() {
  local out=$1
  server_tls=$out
  mkdir -p "$out"
  (
    cd "$out" || exit 1
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=simba test CA" -keyout ca.key -out ca.pem
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=not the simba test CA" -keyout wrong-ca.key \
            -out wrong-ca.pem
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out server.pem
    chmod 600 server.key
  ) >"$out/openssl.log" 2>&1 || { cat "$out/openssl.log"; return 1; }
}
