# What the src/backends/*/test_server.sh wrappers share; sourced by them. Each wrapper starts one throwaway
# server on loopback, on a free port, in a temporary folder, and stops it whatever happens.

# server_require WRAPPER WHAT CHECK...: exits 1 unless CHECK succeeds ("WHAT is not installed").
server_require() {
  local wrapper=$1 what=$2
  shift 2
  "$@" >/dev/null 2>&1 || { echo "$wrapper: $what is not installed (run ./scripts/test)"; exit 1; }
}

# A random port from 20000 to 59999 (a server that finds it taken fails, and the wrapper tries
# another).
server_random_port() { echo $((20000 + RANDOM % 40000)); }

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
# both placeholders (and the TLS ones, after server_make_tls) replaced in every argument.
server_exec() {
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
