#!/usr/bin/env bash
# The chaos test: several `simba lock` processes, each reaching the server through a fault
# proxy of its own, run a critical section that writes a fenced register (simba-fenced-register),
# while a driver kills them (SIGKILL), stops them past their lease (SIGSTOP), partitions their
# wire (both ways or one), delays it past the lease, makes it half-open or resets it, at random.
# At the end the register's log is checked: no write accepted from a stale holder, no token
# shared by two holders, tokens rising from section to section, no interleaved sections, and
# at least --min-sections sections completed.
#
#   chaos_test.sh SIMBA PROXY REGISTER URI [--seconds N] [--min-sections N] [--seed N] [--no-fencing]
#
# --no-fencing: the register accepts every write and the driver only stops the holder past
# its lease; the check must then find violations (this run exits 0 only if it does), which
# shows the test can fail.
set -uo pipefail
simba=$1 proxy_bin=$2 register=$3 uri=$4
shift 4
seconds=15 min_sections=5 fencing=on workers=3 seed=$$
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --min-sections) min_sections=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --no-fencing) fencing=off; shift ;;
    *) echo "chaos_test.sh: unknown option '$1'"; exit 64 ;;
  esac
done
RANDOM=$seed
dir=$(mktemp -d)
children=()
cleanup() {
  exec 2>/dev/null  # not the shell's "Killed" notes
  for pid in "${children[@]}"; do kill -CONT "$pid" 2>/dev/null; kill -9 "$pid" 2>/dev/null; done
  pkill -CONT -f "$dir/register" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
engine=${uri%%:*}
# host:port of the server: after "scheme://" and any "user:password@", before "/" or "?".
hostport=$(sed -E 's|^[a-z]+://([^@/]*@)?([^/?]+).*|\2|' <<<"$uri")

# One proxy per worker: a fault on one wire leaves the others healthy.
declare -a uris controls
for ((i = 0; i < workers; i++)); do
  "$proxy_bin" "$hostport" > "$dir/proxy$i" 2>&1 &
  children+=($!)
  for _ in $(seq 100); do [ -s "$dir/proxy$i" ] && break; sleep 0.05; done
  read -r port control < "$dir/proxy$i" || { echo "chaos: proxy $i did not start"; exit 1; }
  uris[i]=${uri/$hostport/127.0.0.1:$port}
  controls[i]=$control
done
# proxy_do I COMMAND: sends a command to worker I's proxy.
proxy_do() {
  local fd reply
  exec {fd}<>"/dev/tcp/127.0.0.1/${controls[$1]}" || return 1
  echo "$2" >&"$fd"
  read -r reply <&"$fd"
  exec {fd}>&-
  [ "$reply" = ok ] || echo "chaos: proxy $1: '$2': $reply"
}

mutex="chaos-$engine-$seed-$RANDOM"
log="$dir/register"
no_fencing=()
[ "$fencing" = off ] && no_fencing=(--no-fencing)
end=$((SECONDS + seconds))
worker() {
  local i=$1
  while [ "$SECONDS" -lt "$end" ]; do
    "$simba" lock --backend "${uris[i]}" --ttl 1s --transition 500ms --kill-after 1s --timeout 3s "$mutex" -- \
      "$register" section "$log" --writes 8 --interval 25 "${no_fencing[@]}" 2>>"$dir/worker$i.err" &
    echo $! > "$dir/worker$i.pid"
    wait $! 2>/dev/null
    echo $? >> "$dir/worker$i.codes"
  done
}
for ((i = 0; i < workers; i++)); do
  worker "$i" &
  children+=($!)
done

# The holder now: the section process of the last accepted write, if it still runs.
holder_section() {
  local pid
  pid=$(grep accepted "$log" 2>/dev/null | tail -1 | cut -d' ' -f2)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}
# worker_of SIMBA_PID: the worker running it, else a random one.
worker_of() {
  local i
  for ((i = 0; i < workers; i++)); do
    [ "$(cat "$dir/worker$i.pid" 2>/dev/null)" = "$1" ] && { echo "$i"; return; }
  done
  echo $((RANDOM % workers))
}
pause() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }  # pause MS

declare -A done_faults
if [ "$fencing" = on ]; then
  faults=(kill stop partition partition_up partition_down delay half_open reset)
else
  faults=(stop)
fi
while [ "$SECONDS" -lt $((end - 1)) ]; do
  pause $((300 + RANDOM % 700))
  fault=${faults[RANDOM % ${#faults[@]}]}
  section=$(holder_section)
  simba_pid=
  [ -n "$section" ] && simba_pid=$(ps -o ppid= -p "$section" | tr -d ' ')
  if [ -z "$simba_pid" ]; then
    [ "$fencing" = off ] && continue  # stop only a holder inside its section
    simba_pid=$(cat "$dir/worker$((RANDOM % workers)).pid" 2>/dev/null)
  fi
  [ -n "$simba_pid" ] || continue
  i=$(worker_of "$simba_pid")
  case $fault in
    kill) kill -9 "$simba_pid" 2>/dev/null ;;
    stop)
      targets=("$simba_pid" $(pgrep -P "$simba_pid"))
      kill -STOP "${targets[@]}" 2>/dev/null
      pause $((2000 + RANDOM % 1000))  # past the 1.5 s lease: another holder gets in
      kill -CONT "${targets[@]}" 2>/dev/null ;;
    partition) proxy_do "$i" partition; pause $((500 + RANDOM % 2000)); proxy_do "$i" pass ;;
    partition_up) proxy_do "$i" "partition up"; pause $((500 + RANDOM % 2000)); proxy_do "$i" pass ;;
    partition_down) proxy_do "$i" "partition down"; pause $((500 + RANDOM % 2000)); proxy_do "$i" pass ;;
    delay) proxy_do "$i" "delay 2000"; pause $((1000 + RANDOM % 1500)); proxy_do "$i" pass ;;
    half_open) proxy_do "$i" half-open ;;
    reset) proxy_do "$i" reset ;;
  esac
  done_faults[$fault]=$((${done_faults[$fault]:-0} + 1))
done
# The workers end after their current lock (each bounded: --timeout 3s, sections 0.2 s).
for ((i = 0; i < workers; i++)); do wait "${children[workers + i]}" 2>/dev/null; done

faults_json=
for fault in "${!done_faults[@]}"; do faults_json+="\"$fault\":${done_faults[$fault]},"; done
result=$("$register" check "$log" --min-sections "$min_sections" --writes 8)
rc=$?
echo "{\"engine\":\"$engine\",\"fencing\":\"$fencing\",\"seconds\":$seconds,\"seed\":$seed,\"faults\":{${faults_json%,}},\"register\":$result}"
if [ "$fencing" = off ]; then
  # The driver stopped holders past their lease with nothing fencing them off: the check must
  # have seen it.
  [ "$rc" -ne 0 ] && grep -qv '"stale_accepted":0,.*"interleaved":0' <<<"$result" && exit 0
  echo "FAIL: with fencing off the check found no violation (did a stopped holder write again?)"
  exit 1
fi
[ "$rc" -eq 0 ] || { echo "FAIL: the register saw a violation or too few sections"; tail -5 "$dir"/worker*.err; exit 1; }
