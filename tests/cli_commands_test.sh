#!/usr/bin/env bash
# `simba leader`, `schedule`, `watch`, `list`, `release --force`, the waiting line, options per
# subcommand and where a password may come from: real processes on one SQLite file. The
# multi-process leader, schedule and watch cases on every engine kind: cli_leaders_test.sh.
set -uo pipefail
simba=$(realpath "${1:?usage: cli_commands_test.sh path/to/simba}")
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
export SIMBA_BACKEND="sqlite://$dir/locks.db?ttl=500ms&transition=300ms"
source "$(dirname "$0")/cli_checks.sh"
cd "$dir" || exit 1

# A command for leader/schedule: logs "<name> start <token>" and "<name> end", and holds
# overlap.lock (flock -n) while it runs, so two at once across processes log OVERLAP.
cat > job.sh <<'EOF'
#!/bin/sh
# job.sh NAME SECONDS: one run
exec 9>>overlap.lock
flock -n 9 || echo "OVERLAP $1" >> log
echo "$1 start $SIMBA_FENCING_TOKEN $SIMBA_CONTENDER_ID" >> log
echo $$ > "$1.pid"
trap 'echo "$1 term" >> log; exit 0' TERM
i=0
while [ "$i" -lt "$(($2 * 10))" ]; do sleep 0.1; i=$((i + 1)); done
echo "$1 end" >> log
EOF
chmod +x job.sh
count() { grep -c "$1" log 2>/dev/null || true; }
count_at_least() { [ "$(count "$1")" -ge "$2" ]; }  # PATTERN N: log has N lines matching, or more
lines_at_least() { [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; }

# --- leader: one command at a time; SIGTERM stops it, releases, exits 143; the other takes over.
"$simba" leader L -- ./job.sh A 100 2>leader-a.err & a=$!
wait_for 5 grep -q "A start" log
"$simba" leader L -- ./job.sh B 100 2>leader-b.err & b=$!
sleep 1
check "leader: only the leader runs its command" [ "$(count 'B start')" -eq 0 ]
kill -TERM "$a"; wait "$a"; got=$?
check "leader: SIGTERM to simba exits 143 (was $got)" [ "$got" -eq 143 ]
check "leader: ... and its command got SIGTERM" grep -q "A term" log
check "leader: the other takes over" wait_for 5 grep -q "B start" log
token_a=$(awk '/A start/ {print $3; exit}' log)
token_b=$(awk '/B start/ {print $3; exit}' log)
check "leader: with a larger fencing token ($token_a < $token_b)" [ "$token_b" -gt "$token_a" ]

# A lease taken away (release --force) is lost leadership: the command is terminated and simba
# stands by, then leads again (nobody else contends) with a new token.
"$simba" release --force --yes L 2>release.err
check "leader: after release --force the command is terminated" wait_for 5 grep -q "B term" log
check "leader: ... and simba says it stands by" wait_for 5 grep -q "lost leadership of mutex 'L'" leader-b.err
check "leader: ... then leads again" wait_for 5 count_at_least "B start" 2
kill -INT "$b"; wait "$b"; got=$?
check "leader: SIGINT exits 130 (was $got)" [ "$got" -eq 130 ]
check "leader: never two commands at once" [ "$(count OVERLAP)" -eq 0 ]
"$simba" status --json L > status.json
check "leader: the mutex is free after simba exits" grep -q '"owner":null' status.json

# SIGKILL and SIGSTOP of a leader, three leaders on a fenced register, and schedules counted
# from above and below, on SQLite, Redis and ZooKeeper: tests/cli_leaders_test.sh.

# --restart: no exits with the command's status; on-failure runs again until success; always
# runs again after success too.
expect 7 "leader --restart no: the command's status" -- "$simba" leader R1 -- sh -c 'exit 7'
rm -f n
expect 0 "leader --restart on-failure: runs again until it succeeds" -- \
  "$simba" leader --restart on-failure R2 -- sh -c 'n=$(($(cat n 2>/dev/null || echo 0) + 1)); echo $n > n; [ $n -ge 3 ]'
check "leader --restart on-failure: three runs" [ "$(cat n)" -eq 3 ]
check "leader --restart on-failure: says it runs again" grep -q "running it again in" "$dir/err"
rm -f n
"$simba" leader --restart always R3 -- sh -c 'echo x >> n' 2>/dev/null & r=$!
check "leader --restart always: runs again after success" wait_for 10 lines_at_least n 3
kill -TERM "$r"; wait "$r"

# --- schedule (the rest in tests/cli_leaders_test.sh).
# A run that outlives leadership is terminated.
: > log
"$simba" schedule --every 10s T -- ./job.sh T 100 2>sched-t.err & t=$!
wait_for 5 grep -q "T start" log
"$simba" release --force --yes T 2>/dev/null
check "schedule: a run that outlives leadership gets SIGTERM" wait_for 5 grep -q "T term" log
kill -TERM "$t"; wait "$t"

# --- watch: a line per change of owner; --json lines; SIGINT exits 0.
"$simba" watch W > watch.txt 2>watch.err & w=$!
"$simba" watch --json W > watch.json 2>/dev/null & wj=$!
wait_for 10 grep -q . watch.txt  # each watcher printed the mutex's state as it started
wait_for 10 grep -q . watch.json
"$simba" lock W -- sh -c 'date +%s%3N > held-at; sleep 0.3'
wait_for 10 bash -c "[ \$(grep -c 'W  free' watch.txt) -ge 2 ]"  # the release reached the watchers
wait_for 10 bash -c "[ \$(wc -l < watch.json) -ge 3 ]"
kill -INT "$w" "$wj"; wait "$w"; got=$?; wait "$wj"; gotj=$?
check "watch: SIGINT exits 0 ($got, $gotj)" [ "$got" -eq 0 -a "$gotj" -eq 0 ]
check "watch: a line for the new owner" grep -qE "W  owner [^ ]+  token [0-9]+" watch.txt
check "watch: and one for its release" [ "$(grep -c 'W  free' watch.txt)" -ge 2 ]
check "watch --json: every line is an object with owner and token" \
  python3 -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; assert len(rows) >= 3; assert any(r["owner"] for r in rows); assert all("fencing_token" in r for r in rows)' watch.json

# SQLite pushes nothing: the observer polls every 25 ms while the mutex is held, so the owner's
# line comes within a poll (and the time to start the command) of the command's start. An
# observer that did not poll would find the owner only at a round of its own, a ttl (500 ms)
# later: the bound tells the two apart.
check "watch: the owner's line came within a ttl (500 ms) of the acquisition" \
  python3 -c 'import json,sys; held=int(open(sys.argv[2]).read()); rows=[json.loads(l) for l in open(sys.argv[1])]
seen=[r["now"] for r in rows if r["owner"]]; assert seen and abs(seen[0] - held) < 500, (seen, held)' watch.json held-at

# --- list: records by prefix, --json, --limit.
"$simba" lock list/a -- true; "$simba" lock list/b -- true; "$simba" lock other -- true
"$simba" list list/ > list.txt
check "list: the names of the prefix" [ "$(grep -c '^list/' list.txt)" -eq 2 ]
check "list: not the others" bash -c "! grep -q '^other' list.txt"
"$simba" list list/ --json > list.json
check "list --json: one object per record" \
  python3 -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; assert [r["mutex"] for r in rows] == ["list/a", "list/b"]' list.json
expect 0 "list --limit 1" -- "$simba" list list/ --limit 1
check "list --limit 1: one record and a note that more match" \
  bash -c "[ \$(grep -c '^list/' '$dir/out') -eq 1 ] && grep -q 'more than 1' '$dir/err'"

# --- release --force: the holder's simba lock exits 75; the next owner's token is larger.
"$simba" lock H -- sleep 30 & h=$!
wait_for 5 bash -c "'$simba' status --json H | grep -q '\"owner\":\"'"
before=$("$simba" status --json H | python3 -c 'import json,sys; print(json.load(sys.stdin)["fencing_token"])')
expect 64 "release without --force is refused" -- "$simba" release H
echo n | script -qec "'$simba' release --force H" /dev/null > tty.txt 2>&1
check "release on a terminal asks, and 'n' releases nothing" grep -q "Delete the lease of" tty.txt
check "... the holder still holds" kill -0 "$h"
"$simba" release --force --yes H 2>release.err
wait "$h"; got=$?
check "release --force: the holder finds out at its next renewal and exits 75 (was $got)" [ "$got" -eq 75 ]
"$simba" lock H -- sh -c 'echo $SIMBA_FENCING_TOKEN > next'
check "release --force: the next token is larger ($before < $(cat next))" [ "$(cat next)" -gt "$before" ]
expect 0 "release of a free mutex says so" -- "$simba" release --force --yes H

# --- the waiting line on a terminal, for leader too.
"$simba" leader WL -- sleep 30 & holder=$!
wait_for 5 bash -c "'$simba' status --json WL | grep -q '\"owner\":\"'"
shows_waiting_line() { grep -qE "waiting for mutex 'WL': held by [^ ]+ for [0-9]+s \(token [0-9]+\)" "$1"; }
# on_terminal FILE COMMAND: runs COMMAND (a simba that waits for WL) on a pseudo-terminal, the
# screen going to FILE, until the waiting line is on it or 20 s passed (the line comes within
# 500 ms of the first look; how long the process takes to start is the machine's), then ends it.
on_terminal() {
  local file=$1 pid
  script -qec "$2" /dev/null >"$file" 2>&1 &
  pid=$!
  wait_for 20 shows_waiting_line "$file"
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}
on_terminal tty-leader.txt "'$simba' leader WL -- true"
check "leader on a terminal: the waiting line names the holder and its token" shows_waiting_line tty-leader.txt
on_terminal tty-schedule.txt "'$simba' schedule --every 1s WL -- true"
check "schedule on a terminal: the same line while it stands by" shows_waiting_line tty-schedule.txt
"$simba" leader WL -- true 2>plain.err & plain=$!
sleep 1; kill -TERM "$plain"; wait "$plain"
check "leader off a terminal: no waiting line" bash -c "! grep -q 'waiting for' plain.err"
kill -TERM "$holder"; wait "$holder"

# --- options mean something where they are accepted.
expect 64 "status takes no --ttl" -- "$simba" status --ttl 1s m
expect 64 "list takes no --transition" -- "$simba" list --transition 1s
expect 64 "watch takes no --ttl" -- "$simba" watch --ttl 1s m
expect 64 "a command after -- only for lock, leader, schedule" -- "$simba" status m -- true
expect 64 "leader --restart takes no, on-failure, always" -- "$simba" leader --restart sometimes m -- true

# --- passwords: never needed on the command line.
"$simba" status --backend "redis://:secret@127.0.0.1:9/0?connect_timeout=200ms" m 2>pw.err; got=$?
check "a password in --backend: unreachable here (exit $got, want 69)" [ "$got" -eq 69 ]
check "... and a warning that ps shows it, once" [ "$(grep -c 'visible to every user' pw.err)" -eq 1 ]
echo "sqlite://$dir/locks.db" > backend.txt
expect 0 "--backend-file reads the URI from a file" -- env -u SIMBA_BACKEND "$simba" status --backend-file backend.txt L
check "... and warns about nothing" [ ! -s "$dir/err" ]
expect 64 "password_file that cannot be read" -- "$simba" status --backend "memory:?password_file=$dir/none" m
check "... names it" grep -q "password_file '$dir/none' cannot be read" "$dir/err"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
