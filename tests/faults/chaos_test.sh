#!/usr/bin/env bash
# The chaos test: several `simba lock` processes, each reaching the server through a fault
# proxy of its own, run a critical section that writes a fenced register (simba-fenced-register),
# while a driver kills them (SIGKILL), stops them past their lease (SIGSTOP), partitions their
# wire (both ways or one), delays it past the lease, makes it half-open or resets it, at random.
# At the end the register's log is checked: no write accepted from a stale holder, no token
# shared by two holders, tokens rising from section to section, no interleaved sections, and
# at least --min-sections sections completed.
#
#   chaos_test.sh SIMBA PROXY REGISTER URI [--seconds N] [--min-sections N] [--seed N]
#                 [--permits N] [--no-fencing]
#
# --permits N: the workers share a semaphore of N permits (`simba lock --permits N`), N + 2 of
# them, so some always wait; the register fences each permit slot on its own, and the check
# also wants at most N holders in the register at any instant.
# --no-fencing: the register accepts every write and the driver only stops the holder past
# its lease; the check must then find violations (this run exits 0 only if it does), which
# shows the test can fail.
set -uo pipefail
simba=$1 proxy_bin=$2 register=$3 uri=$4
shift 4
seconds=15 min_sections=5 fencing=on workers=3 seed=$$ permits=
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --min-sections) min_sections=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --permits) permits=$2; shift 2 ;;
    --no-fencing) fencing=off; shift ;;
    *) echo "chaos_test.sh: unknown option '$1'"; exit 64 ;;
  esac
done
RANDOM=$seed
semaphore=()
if [ -n "$permits" ]; then
  [[ "$permits" =~ ^[1-9][0-9]*$ ]] || { echo "chaos_test.sh: --permits needs a number > 0, not '$permits'"; exit 64; }
  workers=$((permits + 2))
  semaphore=(--permits "$permits")
fi
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

mutex="chaos-$engine-$seed-$RANDOM${permits:+-semaphore}"
log="$dir/register"
no_fencing=()
[ "$fencing" = off ] && no_fencing=(--no-fencing)
# Writes per section, 25 ms apart. The negative control's sections are longer (1 s): on a
# loaded machine the driver must still find one with writes left when it stops it.
writes=8
[ "$fencing" = off ] && writes=40
end=$((SECONDS + seconds))
# The workers lock again and again until the driver says stop (the file $dir/stop).
worker() {
  local i=$1
  while [ ! -e "$dir/stop" ]; do
    "$simba" lock --backend "${uris[i]}" --ttl 1s --transition 500ms --kill-after 1s --timeout 3s "${semaphore[@]}" "$mutex" -- \
      "$register" section "$log" --writes "$writes" --interval 25 "${no_fencing[@]}" 2>>"$dir/worker$i.err" &
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

# stop_past_lease SIMBA_PID SECTION_PID ORDER: stops `simba lock` and its section (SIGSTOP) past
# their lease, then resumes them: both at once (ORDER=together), or the section first
# (ORDER=section_first), as a process whose garbage-collection pause ends before its lock
# library notices: it writes again while simba still believes it holds the lease. With
# section_first it waits (bounded) for another holder's accepted write before it resumes the
# section, and for the section's next write before it resumes simba. Returns 0 when the stopped
# section wrote after another holder did (a stale write, certain), 1 otherwise (both resumed).
stop_past_lease() {
  local simba_pid=$1 section=$2 order=$3 targets mine token last slot waited
  targets=("$simba_pid" $(pgrep -P "$simba_pid"))
  kill -STOP "${targets[@]}" 2>/dev/null
  if [ "$order" = together ]; then
    pause $((2000 + RANDOM % 1000))  # past the 1.5 s lease: another holder gets in
    kill -CONT "${targets[@]}" 2>/dev/null
    return 1
  fi
  # A stale write needs a stopped section with a write left that holds no lock on the register.
  mine=$(grep " $section " "$log" | tail -1)
  token=${mine%% *}
  last=$(cut -d' ' -f3 <<<"$mine")
  slot=$(cut -d' ' -f5 <<<"$mine")
  if [ -z "$mine" ] || [ "$last" -ge $((writes - 1)) ] || ! flock -n "$log.lock" true; then
    kill -CONT "${targets[@]}" 2>/dev/null
    if [ -z "$mine" ]; then skipped+="no write yet; "
    elif [ "$last" -ge $((writes - 1)) ]; then skipped+="its last write done; "
    else skipped+="inside the register's lock; "; fi
    return 1
  fi
  # Another holder's accepted write with a newer token on the same slot: the lease went on.
  for ((waited = 0; waited < 200; waited++)); do
    awk -v t="$token" -v s="$section" -v slot="$slot" \
      '$2 != s && $1 > t && $4 == "accepted" && $5 == slot { found = 1 } END { exit !found }' "$log" &&
      break
    sleep 0.05
  done
  if [ "$waited" -ge 200 ]; then
    kill -CONT "${targets[@]}" 2>/dev/null
    skipped+="no successor in 10 s; "
    return 1
  fi
  kill -CONT "$section" 2>/dev/null
  for ((waited = 0; waited < 100; waited++)); do
    [ "$(grep -c " $section " "$log")" -gt "$((last + 1))" ] && break
    sleep 0.02
  done
  kill -CONT "${targets[@]}" 2>/dev/null
  [ "$waited" -lt 100 ]
}

declare -A done_faults
stale_rounds=0
skipped=""  # why stop_past_lease made no stale write, attempt by attempt
first_faults=(kill stop)
if [ "$fencing" = on ]; then
  faults=(kill stop stop_section_first partition partition_up partition_down delay half_open reset)
else
  # The negative control: a stopped section resumed before its simba writes with a stale token
  # the register does not fence off, every time: one such round is enough.
  faults=(stop_section_first)
fi
while [ "$SECONDS" -lt $((end - 1)) ]; do
  if [ "$fencing" = on ]; then pause $((300 + RANDOM % 700)); else pause $((50 + RANDOM % 100)); fi
  fault=${faults[RANDOM % ${#faults[@]}]}
  section=$(holder_section)
  # A semaphore's run first SIGKILLs and SIGSTOPs a holder inside its section, then goes on at
  # random.
  if [ "$fencing" = on ] && [ -n "$permits" ] && [ "${#first_faults[@]}" -gt 0 ] && [ -n "$section" ]; then
    fault=${first_faults[0]}
    first_faults=("${first_faults[@]:1}")
  fi
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
    stop) stop_past_lease "$simba_pid" "$section" together ;;
    stop_section_first)
      [ -n "$section" ] || continue
      stop_past_lease "$simba_pid" "$section" section_first || continue
      stale_rounds=$((stale_rounds + 1)) ;;
    partition) proxy_do "$i" partition; pause $((500 + RANDOM % 2000)); proxy_do "$i" pass ;;
    partition_up) proxy_do "$i" "partition up"; pause $((500 + RANDOM % 2000)); proxy_do "$i" pass ;;
    partition_down) proxy_do "$i" "partition down"; pause $((500 + RANDOM % 2000)); proxy_do "$i" pass ;;
    delay) proxy_do "$i" "delay 2000"; pause $((1000 + RANDOM % 1500)); proxy_do "$i" pass ;;
    half_open) proxy_do "$i" half-open ;;
    reset) proxy_do "$i" reset ;;
  esac
  done_faults[$fault]=$((${done_faults[$fault]:-0} + 1))
  [ "$fencing" = off ] && [ "$stale_rounds" -gt 0 ] && break
done
# The faults are over. The check wants --min-sections completed sections (a run in which the
# holders got nowhere shows nothing): on a loaded machine, or after a fault whose lease outlives
# the run (a killed ZooKeeper holder's node lasts its session), the workers go on, without
# faults, until they completed that many; bounded, so a stuck mutex still fails the check.
completed() { "$register" check "$log" --writes "$writes" --permits "${permits:-1}" | sed -nE 's/.*"completed":([0-9]+).*/\1/p'; }
if [ "$fencing" = on ]; then
  for ((waited = 0; waited < 120; waited++)); do
    [ "$(completed)" -ge "$min_sections" ] 2>/dev/null && break
    sleep 0.5
  done
fi
touch "$dir/stop"
# The workers end after their current lock (each bounded: --timeout 3s, sections 0.2 s).
for ((i = 0; i < workers; i++)); do wait "${children[workers + i]}" 2>/dev/null; done

faults_json=
for fault in "${!done_faults[@]}"; do faults_json+="\"$fault\":${done_faults[$fault]},"; done
result=$("$register" check "$log" --min-sections "$min_sections" --writes "$writes" --permits "${permits:-1}")
rc=$?
echo "{\"engine\":\"$engine\",\"permits\":${permits:-null},\"fencing\":\"$fencing\",\"seconds\":$seconds,\"seed\":$seed,\"faults\":{${faults_json%,}},\"stale_rounds\":$stale_rounds,\"register\":$result}"
if [ "$fencing" = off ]; then
  # The driver made a stopped holder write after its successor with nothing fencing it off:
  # the check must have seen that stale write.
  if [ "$stale_rounds" -eq 0 ]; then
    echo "FAIL: the driver never made a stale write; its attempts: ${skipped:-none (no holder inside its section)}"
    exit 1
  fi
  [ "$rc" -ne 0 ] && ! grep -q '"stale_accepted":0,' <<<"$result" && exit 0
  echo "FAIL: with fencing off the check found no stale write, though the driver made one"
  exit 1
fi
[ "$rc" -eq 0 ] || { echo "FAIL: the register saw a violation or too few sections"; tail -n 5 "$dir"/worker*.err; exit 1; }
