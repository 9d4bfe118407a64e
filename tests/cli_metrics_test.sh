#!/usr/bin/env bash
# `--http` of simba leader, lock and schedule, as an operator's tools see it: promtool accepts
# /metrics; a real Prometheus (Debian's, on loopback, in this test's folder) scrapes two
# `simba leader --http` processes and sum(simba_leader{mutex=...}) is exactly 1; /leader answers
# 200 on exactly one of them, and on the other within lease + 1 s of the leader's SIGKILL;
# /healthz says 503 with a reason once the backend fails; 3,000 malformed requests get
# 400/404 and leave the server serving. `simba top` without a terminal and on a pseudo-terminal.
#
#   cli_metrics_test.sh SIMBA
set -uo pipefail
simba=$(realpath "${1:?usage: cli_metrics_test.sh SIMBA}")
root=$(cd "$(dirname "$0")/.." && pwd)
source "$(dirname "$0")/cli_lib.sh"  # fail, finish; cd's into a folder of its own
cleanup() {
  exec 2>/dev/null
  local pids
  pids=$(jobs -p)
  [ -n "$pids" ] && kill -KILL $pids
  pkill -KILL -f "^sleep 86$$\$" || true  # the commands of leaders killed with SIGKILL
  wait
  rm -rf "$work"
}
trap cleanup EXIT
uri="sqlite://$work/locks.db"
ttl_ms=1000 transition_ms=500
bound_ms=$((ttl_ms + transition_ms + 1000))  # the lease, + 1 s
lease=(--backend "$uri" --ttl "${ttl_ms}ms" --transition "${transition_ms}ms")
mutex="metrics-$$-$RANDOM"
now_ms() { date +%s%3N; }

# port_of ERRFILE: the port `simba ... --http 127.0.0.1:0` said it serves on (waits up to 10 s).
port_of() {
  local i p
  for ((i = 0; i < 500; i++)); do
    p=$(grep -o 'serving http://127.0.0.1:[0-9]*' "$1" 2>/dev/null | grep -o '[0-9]*$')
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.02
  done
  return 1
}
code_of() { curl -s -o /dev/null -m 5 -w '%{http_code}' "http://127.0.0.1:$1$2"; }

# --- two leaders
"$simba" leader "${lease[@]}" --http 127.0.0.1:0 "$mutex" -- sleep "86$$" 2>leader-1.err &
pids=($!)
"$simba" leader "${lease[@]}" --http 127.0.0.1:0 "$mutex" -- sleep "86$$" 2>leader-2.err &
pids+=($!)
ports=("$(port_of leader-1.err)" "$(port_of leader-2.err)")
[ -n "${ports[0]}" ] && [ -n "${ports[1]}" ] || { fail "the leaders never said their ports"; cat leader-*.err; finish; exit; }

# exactly one leader, by /leader
leader_index() {
  local i=$1 codes
  for ((; i > 0; i--)); do
    codes="$(code_of "${ports[0]}" /leader) $(code_of "${ports[1]}" /leader)"
    case $codes in
      "200 503") echo 0; return 0 ;;
      "503 200") echo 1; return 0 ;;
      "200 200") echo both; return 1 ;;  # said by the caller: this runs in $(...)
    esac
    sleep 0.05
  done
  return 1
}
first=$(leader_index 200) || fail "no single leader by /leader within 10 s${first:+ (/leader said 200 on $first)}"
[[ "$first" =~ ^[01]$ ]] || first=0

# promtool accepts the exposition, and it shows the leadership
curl -s -m 5 "http://127.0.0.1:${ports[$first]}/metrics" > metrics.txt
promtool check metrics < metrics.txt > promtool.txt 2>&1 || fail "promtool check metrics: $(cat promtool.txt)"
grep -q "^simba_leader{mutex=\"$mutex\"} 1$" metrics.txt || fail "the leader's /metrics lacks simba_leader 1"
grep -q '^simba_acquisitions_total 1$' metrics.txt || fail "the leader's /metrics lacks its acquisition"
grep -q "^simba_mutex_acquisitions_total{mutex=\"$mutex\"} 1$" metrics.txt || fail "the leader's /metrics lacks its mutex's series"
grep -q '^simba_backend_round_trip_seconds_count{operation="acquire"} [1-9]' metrics.txt ||
  fail "the leader's /metrics lacks its acquire round trips"
[ "$(code_of "${ports[$first]}" /healthz)" = 200 ] || fail "/healthz is not 200 while the backend answers"

# --- the scrape configs the README and docs/observability.md show are ones Prometheus takes
for doc in README.md docs/observability.md; do
  awk '/^```yaml$/ { inside = 1; block = ""; next } inside && /^```$/ { inside = 0; if (block ~ /scrape_configs:/) print block; next }
       inside { block = block $0 "\n" }' "$root/$doc" | sed '/^$/d' > "scrape-$(basename "$doc").yml"
  grep -q "scrape_configs:" "scrape-$(basename "$doc").yml" || fail "$doc shows no scrape config"
  promtool check config "scrape-$(basename "$doc").yml" > check.txt 2>&1 || fail "$doc's scrape config: $(cat check.txt)"
done

# --- a real Prometheus scrapes both: sum(simba_leader) is exactly 1
prom_port=""
for attempt in 1 2 3 4 5; do
  p=$((20000 + RANDOM % 30000))
  cat > prometheus.yml <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: simba
    static_configs:
      - targets: ['127.0.0.1:${ports[0]}', '127.0.0.1:${ports[1]}']
EOF
  prometheus --config.file=prometheus.yml --storage.tsdb.path="$work/tsdb" --web.listen-address="127.0.0.1:$p" \
    > prometheus.log 2>&1 &
  prom_pid=$!
  for ((i = 0; i < 300; i++)); do
    [ "$(code_of "$p" /-/ready)" = 200 ] && { prom_port=$p; break; }
    kill -0 "$prom_pid" 2>/dev/null || break
    sleep 0.05
  done
  [ -n "$prom_port" ] && break
  kill -KILL "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null
done
# query EXPR: its one value, or nothing
query() {
  curl -s -m 5 "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    grep -o '"value":\[[^]]*\]' | grep -o '"[^"]*"\]$' | tr -d '"]'
}
if [ -z "$prom_port" ]; then
  fail "prometheus did not start: $(tail -5 prometheus.log)"
else
  scraped=""
  for ((i = 0; i < 600; i++)); do  # until both targets were scraped (up to 30 s)
    [ "$(query "count(simba_leader{mutex=\"$mutex\"})")" = 2 ] && { scraped=yes; break; }
    sleep 0.05
  done
  [ -n "$scraped" ] || fail "prometheus never scraped both leaders: $(tail -5 prometheus.log)"
  sum=$(query "sum(simba_leader{mutex=\"$mutex\"})")
  [ "$sum" = 1 ] || fail "sum(simba_leader) is '$sum', want 1"
  kill "$prom_pid"; wait "$prom_pid" 2>/dev/null
fi

# --- the leader is SIGKILLed: the other answers 200 on /leader within lease + 1 s
other=$((1 - first))
killed_at=$(now_ms)
kill -KILL "${pids[$first]}"
took=""
while (($(now_ms) - killed_at < 3 * bound_ms)); do
  [ "$(code_of "${ports[$other]}" /leader)" = 200 ] && { took=$(($(now_ms) - killed_at)); break; }
  sleep 0.02
done
echo "the other leader's /leader said 200 after ${took:-never} ms (bound ${bound_ms} ms)"
[ -n "$took" ] && ((took <= bound_ms)) || fail "/leader of the other process: 200 after ${took:-never} ms, bound ${bound_ms} ms"

# --- malformed requests: 400 or 404, never a crash
survivor=${ports[$other]}
bad_codes=0
# 600 random paths of 200 bytes, made at once (a process per request would make this part
# slow on a busy machine; the requests themselves are the shell's own).
mapfile -t paths < <(head -c 4000000 /dev/urandom | tr -dc 'a-z%' | fold -w 200 | head -n 600)
[ "${#paths[@]}" = 600 ] || fail "made ${#paths[@]} random paths, want 600"
for ((i = 0; i < 3000; i++)); do
  case $((i % 5)) in
    0) request=$'GARBAGE\r\n\r\n' ;;
    1) request=$'GET /metrics/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n' ;;
    2) request=$'DELETE /leader HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n' ;;
    3) request="GET /${paths[i / 5]} HTTP/1.1"$'\r\n\r\n' ;;
    4) request=$'GET /leader HTTP/9.9\r\nHost: \x01\x02\r\nBad header line\r\n\r\n' ;;
  esac
  exec 3<>"/dev/tcp/127.0.0.1/$survivor" || { fail "connection $i refused"; break; }
  printf '%s' "$request" >&3
  IFS= read -r -t 5 status <&3
  exec 3>&-
  case $status in
    "HTTP/1.1 400"* | "HTTP/1.1 404"*) ;;
    *) bad_codes=$((bad_codes + 1)); echo "request $i ($((i % 5))): '$status'" ;;
  esac
done
for ((i = 0; i < 20; i++)); do  # cut off mid-request
  exec 3<>"/dev/tcp/127.0.0.1/$survivor" || { fail "connection refused after $i cut requests"; break; }
  printf 'GET /metr' >&3
  exec 3>&-
done
((bad_codes == 0)) || fail "$bad_codes malformed requests got neither 400 nor 404"
kill -0 "${pids[$other]}" 2>/dev/null || fail "simba leader died under malformed requests"
[ "$(code_of "$survivor" /leader)" = 200 ] || fail "/leader is not 200 after the malformed requests"

# --- the backend fails: /healthz says 503 and why, in one line, with no secret
# The write-ahead log goes first and the wal-index (-shm) last: a read that finds the wal-index
# broken rebuilds it from the log, so with the log still intact in between, the process would
# heal its view and go on from its page cache while every file on disk is garbage. Each poll
# breaks them all again (a write may have started a fresh log meanwhile). Garbage is written
# over each file in place, as a failing disk would: no file ever shrinks. SQLite maps the
# wal-index (and simba the wake file): a file truncated under a mapping kills the process with
# SIGBUS at its next read, inside SQLite (docs/engines.md), which `cat garbage > file` did
# whenever a read fell between its truncation and its write (a `simba leader` whose files were
# so broken every 50 ms for 5 s died in 5 of 21 rounds; written over in place, in none of 39).
head -c 65536 /dev/urandom > garbage
break_database() {
  local file
  for file in "$work/locks.db-wal" "$work/locks.db" "$work/locks.db-wake" "$work/locks.db-shm"; do
    [ -e "$file" ] && dd if=garbage of="$file" conv=notrunc status=none
  done
}
healthz=""
broken_at=$(now_ms)
while (($(now_ms) - broken_at < 20000)); do  # a read fails at once; 20 s covers a busy machine
  break_database
  curl -s -m 5 -o healthz.txt -w '%{http_code}' "http://127.0.0.1:$survivor/healthz" > healthz.code
  [ "$(cat healthz.code)" = 503 ] && { healthz=503; break; }
  sleep 0.05
done
[ "$healthz" = 503 ] || fail "/healthz is not 503 within 20 s of a broken database: $(cat healthz.code) $(cat healthz.txt)"
[ "$(wc -l < healthz.txt)" = 1 ] && grep -q '^unavailable: ' healthz.txt || fail "/healthz's reason: $(cat healthz.txt)"
kill -KILL "${pids[$other]}"
rm -f "$work/locks.db"*

# --- lock and schedule serve the same endpoint
"$simba" lock "${lease[@]}" --http 127.0.0.1:0 "$mutex-lock" -- sleep "86$$" 2>lock.err &
port=$(port_of lock.err) || fail "simba lock never said its port"
for ((i = 0; i < 200; i++)); do [ "$(code_of "$port" /leader)" = 200 ] && break; sleep 0.05; done
[ "$(code_of "$port" /leader)" = 200 ] || fail "simba lock --http: /leader is not 200 while it holds"
curl -s -m 5 "http://127.0.0.1:$port/metrics" | grep -q "^simba_leader{mutex=\"$mutex-lock\"} 1$" ||
  fail "simba lock --http: /metrics lacks simba_leader 1"
"$simba" schedule "${lease[@]}" --every 1h --http 127.0.0.1:0 "$mutex-schedule" -- true 2>schedule.err &
port=$(port_of schedule.err) || fail "simba schedule never said its port"
for ((i = 0; i < 200; i++)); do [ "$(code_of "$port" /leader)" = 200 ] && break; sleep 0.05; done
[ "$(code_of "$port" /leader)" = 200 ] || fail "simba schedule --http: /leader is not 200 while it leads"
"$simba" lock "${lease[@]}" --http 127.0.0.1:nope "$mutex-bad" -- true 2>bad.err
rc=$?
[ "$rc" = 64 ] && grep -q "port is not a number" bad.err || fail "a bad --http: exit $rc, $(cat bad.err)"

# --- simba top: one view without a terminal; on a pseudo-terminal, redrawn in place, sorted
# by hold time, until q
top_prefix="$mutex-top/"
"$simba" lock "${lease[@]}" "${top_prefix}z-early" -- sleep "86$$" 2>/dev/null &
"$simba" lock "${lease[@]}" "${top_prefix}free" -- true || fail "simba lock ${top_prefix}free failed"
# Until z-early is held: its owner line names an owner ("owner: (none)" before it is).
held=""
since=$(now_ms)
while (($(now_ms) - since < 20000)); do
  "$simba" status --backend "$uri" "${top_prefix}z-early" 2>/dev/null | grep -q '^owner: *[^( ]' && { held=yes; break; }
  sleep 0.05
done
[ -n "$held" ] || fail "simba lock ${top_prefix}z-early never held it within 20 s"
"$simba" top --backend "$uri" "$top_prefix" > top.txt 2>&1 || fail "simba top without a terminal: $(cat top.txt)"
grep -q "^${top_prefix}z-early  *held  .*  [0-9]*:[0-9]*@" top.txt || fail "simba top lacks the held mutex: $(cat top.txt)"
grep -q "^${top_prefix}free  *free " top.txt || fail "simba top lacks the free mutex: $(cat top.txt)"
[ "$(grep -c "^$top_prefix" top.txt)" = 2 ] || fail "simba top shows other rows: $(cat top.txt)"
{
  sleep 1
  "$simba" lock "${lease[@]}" "${top_prefix}a-later" -- sleep "86$$" 2>/dev/null &
  sleep 2
  printf q
} | timeout 20 script -qec "'$simba' top --backend '$uri' --interval 200ms '$top_prefix'" /dev/null > tty-top.txt 2>&1
rc=$?
[ "$rc" = 0 ] || fail "simba top on a terminal: exit $rc (q did not quit?)"
redraws=$(grep -o $'\x1b\[H\x1b\[2J' tty-top.txt | wc -l)
((redraws >= 5)) || fail "simba top redrew $redraws times in 3 s at 200 ms"
last=$(awk 'BEGIN { RS = "\x1b\\[H\x1b\\[2J" } { screen = $0 } END { print screen }' tty-top.txt | tr -d '\r')
order=$(echo "$last" | grep -o "^${top_prefix}[a-z-]*  *held" | awk '{ print $1 }' | tr '\n' ' ')
[ "$order" = "${top_prefix}z-early ${top_prefix}a-later " ] || fail "simba top's last screen is not sorted by hold time: $last"
echo "$last" | grep -q "^${top_prefix}z-early  *held  *[1-9][0-9]*s " || fail "simba top's held for did not count: $last"

finish
