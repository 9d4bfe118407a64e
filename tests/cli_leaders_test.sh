#!/usr/bin/env bash
# `simba leader`, `simba schedule` and `simba watch` as real processes on one backend: three
# leaders whose commands write a fenced register (simba-fenced-register), a leader killed with
# SIGKILL and one stopped with SIGSTOP (simba and its command) each replaced within the bound
# the lease gives (ttl + transition, on etcd rounded up to whole seconds and revoked on its
# lessor's next scan) plus 1 s plus what a control `simba lock` of a free mutex, run at the
# same moment, took from its start to its command's end on this machine as loaded), the stopped
# one's command ended once it resumes and every write it tries after the takeover refused by
# the register; three schedulers whose runs are counted from above and below; a watcher's
# lines.
#
#   cli_leaders_test.sh SIMBA REGISTER URI     (URI "sqlite": a database in the test's folder;
#                                               a server's URI: run through src/backends/*/test_server.sh)
set -uo pipefail
simba=$(realpath "${1:?usage: cli_leaders_test.sh SIMBA REGISTER URI}")
register=$(realpath "${2:?}")
uri=${3:?}
dir=$(mktemp -d)
cleanup() {
  exec 2>/dev/null
  local pids
  pids=$(jobs -p)
  [ -n "$pids" ] && { kill -CONT $pids; kill -KILL $pids; }
  wait
  rm -rf "$dir"
}
trap cleanup EXIT
[ "$uri" = sqlite ] && uri="sqlite://$dir/locks.db"
source "$(dirname "$0")/cli_checks.sh"
cd "$dir" || exit 1
engine=${uri%%:*}
echo "cli_leaders_test.sh: on $engine"

ttl_ms=1000 transition_ms=500
lease_ms=$((ttl_ms + transition_ms))
# etcd grants leases of whole seconds: ttl + transition rounded up (src/backends/etcd/acquire.cc).
[ "$engine" = etcd ] && lease_ms=$(((lease_ms + 999) / 1000 * 1000))
# etcd revokes an expired lease, and so deletes its key, on its lessor's next scan: every
# 500 ms (etcd 3.4, lease/lessor.go).
revoke_ms=0
[ "$engine" = etcd ] && revoke_ms=500
lease=(--backend "$uri" --ttl "${ttl_ms}ms" --transition "${transition_ms}ms")
now_ms() { date +%s%3N; }
name() { echo "cli-$1-$$-$RANDOM"; }  # a mutex of this run alone

log=$dir/register
# The holder (section pid) of the register's last accepted write, or nothing.
holder_now() { awk '$4 == "accepted" { h = $2 } END { if (h) print h }' "$log" 2>/dev/null; }
# wait_other_holder OLD SECONDS: waits until a holder other than OLD writes; echoes it.
wait_other_holder() {
  local i h
  for ((i = 0; i < $2 * 50; i++)); do
    h=$(holder_now)
    [ -n "$h" ] && [ "$h" != "$1" ] && { echo "$h"; return 0; }
    sleep 0.02
  done
  return 1
}
simba_of() { ps -o ppid= -p "$1" | tr -d ' '; }
# leaders_said LINES: what each leader's simba said last (its last LINES lines of stderr).
leaders_said() {
  local n
  for n in 1 2 3; do
    echo "    leader $n (pid ${leaders[$((n - 1))]}):"
    tail -n "$1" "leader-$n.err" | sed 's/^/      /'
  done
}
# leader_err_of SECTION: the stderr file of the leader whose command is SECTION (running).
leader_err_of() {
  local n simba
  simba=$(simba_of "$1")
  for n in 1 2 3; do [ "${leaders[$((n - 1))]}" = "$simba" ] && echo "leader-$n.err"; done
}
# lost_by_time ERR: prints the line with which the leader of ERR reported a lease that ran out
# by its own clock before a renewal came back (src/core/service_core.cc), if it then stood
# down (src/cli/leader.cc); fails if it did not.
lost_by_time() {
  grep -q "lost leadership of mutex" "$1" 2>/dev/null &&
    grep -m 1 -e "ran out before it could be renewed" -e "after its lease had run out" "$1"
}
# start_control FILE: in the background, a `simba lock` of a free mutex of its own running
# `true`; FILE gets how many ms it took from its start to its end. Run beside a takeover, it
# measures the part of a takeover that is not the lease's (a process coming up, taking a free
# mutex, starting a command) on the machine as loaded at that moment.
start_control() {
  (
    local started
    started=$(now_ms)
    "$simba" lock "${lease[@]}" "$(name control)" -- true >/dev/null 2>&1
    echo $(($(now_ms) - started)) >"$1.tmp" && mv "$1.tmp" "$1"
  ) &
}

# --- leader: three processes, one command at a time, fenced.
L=$(name leader)
# A watcher of the leaders' mutex: when a takeover is late, its lines say whether the engine
# freed the mutex late or the next leader was slow to take it and start its command.
"$simba" watch --backend "$uri" --json "$L" >leader-watch.json 2>/dev/null & leader_watch=$!
# watch_rows SINCE_MS: the watcher's whole lines from SINCE_MS on (its clock, ms), one a row of
# tab-separated now, owner (empty: none), ttl_at and transition_at.
watch_rows() {
  python3 -c 'import json,sys
since=int(sys.argv[2])
for line in open(sys.argv[1]):
    if not line.endswith("\n"): break  # a line the watcher is writing now
    r=json.loads(line)
    if r["now"] >= since: print(r["now"], r["owner"] or "", r["ttl_at"], r["transition_at"], sep="\t")' \
    leader-watch.json "$1"
}
# explain_takeover SINCE_MS: the watcher's lines from 3 s before then (the time it saw each, the
# owner, the ends of its lease), on etcd the key events from then, and what each simba said last.
explain_takeover() {
  watch_rows $(($1 - 3000)) | awk -F'\t' -v since="$1" '{
    printf "    watch %+d ms: owner %s, ttl_at %+d, transition_at %+d\n", $1 - since, ($2 == "" ? "none" : $2),
           ($3 ? $3 - since : 0), ($4 ? $4 - since : 0) }'
  [ "$engine" = etcd ] && awk -v since="$1" '$1 >= since - 3000 {
    printf "    etcd %+d ms: %s\n", $1 - since, substr($0, index($0, " ") + 1) }' leader-keys.log
  leaders_said 3
}
# On etcd, an observer of the leaders' keys themselves: `etcdctl watch` of the mutex's line
# (simba/<mutex>/<lease>, docs/engines.md), each line it prints stamped with when it came (ms).
# The watcher above reads the owner after each change and seldom sees the mutex free: the next
# leader's key owns the moment the old one's goes. The deletion of a key is that moment.
# The server is test_server.sh's, whose URI sets no prefix (simba).
if [ "$engine" = etcd ]; then
  stamp_lines() {
    local line
    while IFS= read -r line; do echo "$((${EPOCHREALTIME/./} / 1000)) $line"; done
  }
  ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:${SIMBA_TEST_ETCD_PORT:?}" watch --prefix "simba/$L/" 2>leader-keys.err |
    stamp_lines >leader-keys.log &
fi
# freed_after SINCE_MS: when the leaders' mutex was first seen free after SINCE_MS (ms): on
# etcd, when the first of its keys was deleted (by the observer of the keys, else by the
# watcher); elsewhere, when the watcher saw it free; or nothing.
freed_after() {
  local at=""
  [ "$engine" = etcd ] && at=$(awk -v since="$1" '$1 >= since && $2 == "DELETE" { print $1; exit }' leader-keys.log 2>/dev/null)
  [ -n "$at" ] || at=$(watch_rows "$1" | awk -F'\t' '$2 == "" { print $1; exit }')
  echo "$at"
}
was_freed() { [ -n "$(freed_after "$1")" ]; }
# check_takeover WHAT OLD SINCE_MS: waits for a holder other than OLD (the leader that WHAT
# happened to at SINCE_MS), sets $new_holder to it, and checks that it came within the bound:
# 1 s and what a control started now took, counted from the lease's end. That end is the lease
# after SINCE_MS where the mutex frees by time. etcd frees it when it revokes the lease, which
# it does at its lessor's next scan (500 ms) after the lease ran out, but a revocation its
# revoker was too busy to take waits for a retry 3 s later (etcd 3.4 lease/lessor.go,
# expiredLeaseRetryInterval), as often as it stays busy: there the bound counts from when the
# old leader's key was deleted (freed_after), and the time until then is shown.
check_takeover() {
  local what=$1 old=$2 since=$3 took control=0 bound freed="" in_time=false
  start_control "control-$since"
  new_holder=$(wait_other_holder "$old" 15)
  took=$(($(now_ms) - since))
  wait_for 20 test -s "control-$since" && control=$(cat "control-$since")
  bound=$((lease_ms + 1000 + control))
  if [ "$engine" = etcd ]; then
    wait_for 2 was_freed "$since"
    freed=$(freed_after "$since")
    if [ -n "$freed" ]; then
      bound=$((freed - since + 1000 + control))
    else
      bound=$((lease_ms + revoke_ms + 1000 + control))  # neither saw it: as if revoked at the first scan
    fi
  fi
  [ -n "$new_holder" ] && [ "$took" -le "$bound" ] && in_time=true
  check "leader $what: another leads in ${took} ms (bound ${bound} ms, control ${control} ms${freed:+, freed by the engine after $((freed - since)) ms})" "$in_time"
  "$in_time" || explain_takeover "$since"
}
leaders=()
for n in 1 2 3; do
  "$simba" leader "${lease[@]}" --restart always "$L" -- \
    "$register" section "$log" --writes 1000000 --interval 20 2>"leader-$n.err" &
  leaders+=($!)
done
first=$(wait_other_holder none 10)
check "leader: one of three leads and its command writes" [ -n "$first" ]
sleep 1
check "leader: only the leader's command writes" [ "$(holder_now)" = "$first" ]

# SIGKILL: the command goes with simba; another leads within the bound.
victim=$(simba_of "$first")
killed_at=$(now_ms)
kill -KILL "$victim"; wait "$victim" 2>/dev/null
check_takeover "killed with SIGKILL" "$first" "$killed_at"
second=$new_holder
check "... and the killed leader's command is gone too" wait_gone "$first" 2

# SIGSTOP of simba and its command (not inside the register's own lock, which would stop
# every writer): another leads within the bound; once resumed, the old command ends and none
# of its writes after the takeover is accepted.
stalled=$(simba_of "$second")
for ((i = 0; i < 50; i++)); do
  kill -STOP "$stalled" "$second"
  flock -n "$log.lock" true && break
  kill -CONT "$stalled" "$second"
  sleep 0.03
done
stopped_at=$(now_ms)
check_takeover "stopped with SIGSTOP" "$second" "$stopped_at"
third=$new_holder
third_err=$(leader_err_of "$third")
sleep 0.3  # the new leader writes on
kill -CONT "$stalled" "$second"
check "... once resumed, the stalled leader's command ends within a ttl" wait_gone "$second" 1
check "... and the stalled simba stands by, still running" kill -0 "$stalled"
sleep 0.5
# The resumed leader must not take over from the new one. The new one may still have lost its
# lease by its own clock, its renewals late on a starved machine: then another leading is
# right, and the new leader says why it stood down.
holder=$(holder_now) late="" kept=false
[ "$holder" = "$third" ] || late=$(lost_by_time "$third_err")
[ "$holder" = "$third" ] || [ -n "$late" ] && kept=true
check "... the new leader still leads${late:+, or lost its lease by its clock and said so ($late)}" "$kept"
"$kept" || { echo "    section $holder writes, not $third"; leaders_said 6; }
stale=$(awk -v s="$second" -v t="$third" '$2 == t { after = 1 } after && $2 == s' "$log")
check "... every write the stalled command tried after the takeover was refused" \
  bash -c "! grep -q accepted <<<'$stale'"
echo "stalled command's writes after the takeover: $(grep -c . <<<"$stale") (all refused)"

codes=()
for pid in "${leaders[@]}"; do
  [ "$pid" = "$victim" ] && continue
  kill -TERM "$pid"
  wait "$pid"
  codes+=($?)
done
check "leader: SIGTERM exits 143 (${codes[*]})" [ "${codes[*]}" = "143 143" ]
kill -INT "$leader_watch"
wait "$leader_watch"
result=$("$register" check "$log" --min-sections 3 --writes 1)
rc=$?
echo "register: $result"
check "leader: the register saw no stale, shared or interleaved write, three leaders" [ "$rc" -eq 0 ]
"$simba" status --backend "$uri" --json "$L" > status.json
check "leader: the mutex is free after every simba exits" grep -q '"owner":null' status.json
if ! grep -q '"owner":null' status.json; then  # say who holds it, and what each simba said last
  echo "    status: $(cat status.json)"
  leaders_said 6
fi

# --- schedule: three schedulers, runs on one leader only, each run failing (exit 3) and
# reported, the schedule going on; at most one run per period, and not far fewer.
S=$(name schedule)
period_ms=200
schedulers=()
started_at=$(now_ms)
for n in 1 2 3; do
  "$simba" schedule "${lease[@]}" --every "${period_ms}ms" "$S" -- \
    sh -c 'echo "run $(date +%s%3N) $SIMBA_FENCING_TOKEN $SIMBA_CONTENDER_ID" >> runs; exit 3' 2>"schedule-$n.err" &
  schedulers+=($!)
done
sleep 3
stopped_at=$(now_ms)
codes=()
for pid in "${schedulers[@]}"; do
  kill -TERM "$pid"
  wait "$pid"
  codes+=($?)
done
runs=$(grep -c '^run' runs 2>/dev/null || echo 0)
first_run=$(awk 'NR == 1 { print $2 }' runs 2>/dev/null)
# Above: no more than one run per period since the schedulers started, plus one per change of
# leader (a new leader's schedule starts at once, as Simba's does: its first run may come less
# than a period after the old leader's last; under load leadership may move). Below: from the
# first run on, a run every period; half of that leaves room for a loaded machine and still
# fails a schedule that ran once, or stopped.
leader_changes=$(awk 'NR > 1 && $4 != who { n++ } { who = $4 } END { print n + 0 }' runs 2>/dev/null || echo 0)
most=$(((stopped_at - started_at) / period_ms + 1 + leader_changes))
least=$(((stopped_at - ${first_run:-$stopped_at}) / period_ms / 2))
check "schedule: $runs runs, at most $most (one per ${period_ms} ms, and one per change of leader: $leader_changes)" \
  [ "$runs" -le "$most" ]
check "schedule: $runs runs, at least $least (half of one per period since the first)" \
  [ "$runs" -ge "$least" -a "$least" -ge 3 ]
runners=$(awk '{ print $4 }' runs | sort | uniq -c | tr -s ' ' | tr '\n' ',')
# One leader at a time: a run by another contender than the run before comes with a larger
# token (a new lease), and tokens never go down. (Leadership may move under load; it must
# not be shared.)
check "schedule: runs by one leader at a time (runs by contender:${runners%,})" \
  awk '$3 < token || ($4 != who && NR > 1 && $3 == token) { bad = 1 } { token = $3; who = $4 } END { exit bad }' runs
reported=$(cat schedule-*.err | grep -c 'exited with status 3; the schedule goes on')
check "schedule: each failing run is reported ($reported of $runs) and the schedule goes on" \
  [ "$reported" -ge $((runs - 1)) -a "$reported" -le "$runs" ]
check "schedule: SIGTERM exits 143 (${codes[*]})" [ "${codes[*]}" = "143 143 143" ]

# --- watch: a line per change of owner, as JSON.
W=$(name watch)
"$simba" watch --backend "$uri" --json "$W" > watch.json 2>watch.err & w=$!
wait_for 5 grep -qs . watch.json
"$simba" lock "${lease[@]}" "$W" -- sh -c 'echo "$SIMBA_FENCING_TOKEN" > watched-token; sleep 0.3'
saw_release() {
  python3 -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1])]
held=[i for i, r in enumerate(rows) if r["owner"]]
assert held and any(not r["owner"] for r in rows[held[0]:])' watch.json 2>/dev/null
}
check "watch: the owner's line, then the release's" wait_for 5 saw_release
kill -INT "$w"
wait "$w"
got=$?
check "watch: SIGINT exits 0 ($got)" [ "$got" -eq 0 ]
check "watch: the owner's line carries the holder's fencing token" \
  python3 -c 'import json,sys; t=int(open(sys.argv[2]).read()); rows=[json.loads(l) for l in open(sys.argv[1])]
assert [r for r in rows if r["owner"] and r["fencing_token"] == t], (rows, t)' watch.json watched-token

echo "$engine: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
