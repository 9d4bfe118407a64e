#!/usr/bin/env bash
# `simba lock` and `simba status`: each outcome has its own exit code and a one-line message.
set -uo pipefail
simba=${1:?usage: cli_exit_codes_test.sh path/to/simba path/to/simba-tck}
tck=${2:?usage: cli_exit_codes_test.sh path/to/simba path/to/simba-tck}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
export SIMBA_BACKEND="sqlite://$dir/locks.db?ttl=1s&transition=500ms"
source "$(dirname "$0")/cli_checks.sh"
# stall PID: SIGSTOPs a holding simba past its lease (ttl 1s + transition 500ms), then SIGCONT.
stall() {
  wait_for 10 bash -c "pgrep -P $1 >/dev/null"  # its command runs: simba holds the lease
  kill -STOP "$1"
  sleep 2
  kill -CONT "$1"
}

expect 3 "command's own status" -- "$simba" lock m -- sh -c 'exit 3'
expect 0 "child sees SIMBA_MUTEX, a token and its arguments untouched" -- "$simba" lock m -- sh -c '[ "$SIMBA_MUTEX" = m ] && [ "$SIMBA_FENCING_TOKEN" -gt 0 ] && [ "$1" = "[ x ]" ]' sh '[ x ]'
expect 64 "bad usage: no command" -- "$simba" lock m
expect 64 "bad usage: no mutex" -- "$simba" lock
expect 64 "bad usage: unknown option" -- "$simba" status --bogus m
expect 64 "bad duration" -- "$simba" lock --timeout soon m -- true
expect 64 "unknown backend scheme" -- "$simba" lock --backend nope://x m -- true
expect 69 "backend unreachable" -- "$simba" lock --backend sqlite:///nonexistent-simba/x.db m -- true
expect 127 "command not found" -- "$simba" lock m -- /nonexistent-simba-command
head -c 4096 /dev/urandom > "$dir/corrupt.db"
expect 70 "a store simba cannot read (not a database)" -- "$simba" status --backend "sqlite://$dir/corrupt.db" m
"$simba" lock held -- sleep 30 &
held=$!
wait_held held || echo "FAIL: the holder of 'held' never held it"
expect 124 "timed out waiting" -- "$simba" lock --timeout 300ms held -- true
grep -q "held" "$dir/err" || { echo "FAIL: timeout message does not name the mutex"; failures=$((failures + 1)); }
expect 124 "a single attempt against a holder that does not cache fails" -- "$simba" lock --timeout 0s held -- true
expect 0 "status while held" -- "$simba" status held --json
grep -q '"owner":"' "$dir/out" || { echo "FAIL: status does not show the owner: $(cat "$dir/out")"; failures=$((failures + 1)); }
kill -TERM "$held"
wait "$held"
# A single attempt against a process that caches its lease (the lock manager's lock caching,
# here the kit's caching worker) gets it: its demand brings the lease back within a hand-back.
mkdir "$dir/cacher"
SIMBA_TCK_CACHE_MUTEX=cached SIMBA_TCK_CACHE_DIR="$dir/cacher" "$tck" --backend "$SIMBA_BACKEND" \
  --gtest_also_run_disabled_tests --gtest_filter=LockCachingTest.DISABLED_CachingOwnerProcess > "$dir/cacher.log" 2>&1 &
cacher=$!
check "the caching worker caches its lease" wait_for 10 test -e "$dir/cacher/cached"
expect 0 "status shows the owner caches" -- "$simba" status cached --json
check "... (\"caching\":true)" grep -q '"caching":true' "$dir/out"
check "... and, unused, that the lease is idle (\"idle\":true)" wait_for 5 sh -c "\"$simba\" status cached --json | grep -q '\"idle\":true'"
check "... also in words" sh -c "\"$simba\" status cached | grep -q 'caching: *yes, idle'"
expect 0 "a single attempt against a caching owner runs its command" -- "$simba" lock --timeout 0s cached -- true
check "... and the caching owner saw its lease go" wait_for 5 test -e "$dir/cacher/handed"
touch "$dir/cacher/stop"
wait "$cacher"; got=$?
check "the caching worker ended well (exit $got)" [ "$got" -eq 0 ]
[ "$got" -eq 0 ] || cat "$dir/cacher.log"

# A lost lease: SIGSTOP the simba process past its lease, then SIGCONT: it must see that the
# lease ran out, terminate the command and exit 75.
"$simba" lock stall -- sleep 30 2>"$dir/stall.err" &
holder=$!
stall "$holder"
wait "$holder"; got=$?
if [ "$got" -eq 75 ] && grep -q "lost the lease" "$dir/stall.err"; then
  echo "ok: lease lost while running (exit 75)"; passes=$((passes + 1))
else
  echo "FAIL: lease lost: exit $got, stderr: $(cat "$dir/stall.err")"; failures=$((failures + 1))
fi
check "the library's warning is logged by default" grep -q "\[warning\].*no longer owner" "$dir/stall.err"
# The same with SIMBA_LOG=error: the library's warnings go, simba's own line stays.
SIMBA_LOG=error "$simba" lock quiet -- sleep 30 2>"$dir/quiet.err" &
holder=$!
stall "$holder"
wait "$holder"
check "SIMBA_LOG=error silences the library's warnings" bash -c "! grep -q '\[warning\]' '$dir/quiet.err' && grep -q 'lost the lease' '$dir/quiet.err'"
# The child sees its contender id, the one `simba status` shows as owner.
"$simba" lock ident -- sh -c 'echo "$SIMBA_CONTENDER_ID" > "$0"; sleep 30' "$dir/id" &
holder=$!
wait_for 10 test -s "$dir/id"
"$simba" status ident --json > "$dir/status" 2>&1
kill -TERM "$holder"
wait "$holder"
check "SIMBA_CONTENDER_ID is the owner's id" grep -q "\"owner\":\"$(cat "$dir/id")\"" "$dir/status"

# Interrupted while waiting: 128 + N, and it leaves the holder alone.
"$simba" lock busy -- sleep 30 &
holder=$!
wait_held busy || echo "FAIL: the holder of 'busy' never held it"
"$simba" lock busy -- true 2>/dev/null &
waiter=$!
sleep 0.5
kill -TERM "$waiter"
wait "$waiter"; got=$?
check "SIGTERM while waiting exits 143 (was $got)" [ "$got" -eq 143 ]
check "the holder still holds after the waiter left" kill -0 "$holder"
kill -TERM "$holder"
wait "$holder"

# While the command runs, a signal goes to it; simba exits with the command's status.
"$simba" lock forward -- sh -c 'trap "exit 42" TERM; touch "$0"; sleep 10 & wait' "$dir/forwarding" &
holder=$!
wait_for 10 test -f "$dir/forwarding"  # the command runs, its trap set
kill -TERM "$holder"
wait "$holder"; got=$?
check "SIGTERM is passed to the command, whose status is simba's (42, was $got)" [ "$got" -eq 42 ]

# A lost lease and a command that ignores SIGTERM: SIGKILL after --kill-after.
"$simba" lock --kill-after 300ms stubborn -- sh -c 'trap "" TERM; echo $$ > "$0"; while :; do sleep 0.1; done' \
  "$dir/stubborn.pid" 2>/dev/null &
holder=$!
stall "$holder"
wait "$holder"; got=$?
check "lease lost, command ignores SIGTERM: exit 75 (was $got)" [ "$got" -eq 75 ]
check "... and the command was SIGKILLed after --kill-after" wait_gone "$(cat "$dir/stubborn.pid")" 3
kill -KILL "$(cat "$dir/stubborn.pid")" 2>/dev/null  # never leave it behind, even on failure

# On a terminal (a pseudo-terminal from script(1)), a waiting simba says whom it waits for;
# off a terminal it says nothing until it fails (the one-line checks above).
"$simba" lock tty -- sleep 10 &
holder=$!
wait_held tty || echo "FAIL: the holder of 'tty' never held it"
script -qec "'$simba' lock --timeout $(first_round_ms tty)ms tty -- true" /dev/null > "$dir/tty" 2>&1
check "on a terminal: one line names the mutex, the holder, how long and its token" \
  grep -qE "waiting for mutex 'tty': held by [^ ]+ for [0-9]+s \(token [0-9]+\)" "$dir/tty"
kill -TERM "$holder"
wait "$holder"

# No --backend and no $SIMBA_BACKEND: the SQLite file under $XDG_STATE_HOME.
env -u SIMBA_BACKEND XDG_STATE_HOME="$dir/state" "$simba" lock xdg -- true
check "the default backend is \$XDG_STATE_HOME/simba/simba.db" [ -s "$dir/state/simba/simba.db" ]

touch "$dir/not-executable"
expect 126 "command not executable" -- "$simba" lock m -- "$dir/not-executable"
# One table: --help lists every exit code docs/cli.md's table has, and no other.
readme=$(dirname "$0")/../docs/cli.md
"$simba" --help > "$dir/help" 2>&1
readme_codes=$(sed -n '/^| exit code | meaning |/,/^$/p' "$readme" | grep -oE '^\| [0-9]+( / [0-9]+)? ' | grep -oE '[0-9]+' | sort -n | tr '\n' ' ')
help_codes=$(grep -oE '^  [0-9]+  ' "$dir/help" | tr -d ' ' | sort -n | tr '\n' ' ')
if [ -n "$help_codes" ] && [ "$readme_codes" = "$help_codes" ]; then
  echo "ok: --help and docs/cli.md list the same exit codes ($help_codes)"; passes=$((passes + 1))
else
  echo "FAIL: exit codes: docs/cli.md '$readme_codes', --help '$help_codes'"; failures=$((failures + 1))
fi
echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
