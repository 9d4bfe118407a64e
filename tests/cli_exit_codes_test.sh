#!/usr/bin/env bash
# `simba lock` and `simba status`: each outcome has its own exit code and a one-line message.
set -uo pipefail
simba=${1:?usage: cli_exit_codes_test.sh path/to/simba}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
export SIMBA_BACKEND="sqlite://$dir/locks.db?ttl=1s&transition=500ms"
failures=0
passes=0
expect() {  # expect CODE DESCRIPTION -- COMMAND...
  local want=$1 what=$2; shift 3
  "$@" 2>"$dir/err" >"$dir/out"; local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, want $want; stderr: $(cat "$dir/err")"; failures=$((failures + 1))
  elif [ "$want" -ge 64 ] && [ "$(wc -l < "$dir/err")" -ne 1 ]; then
    echo "FAIL: $what: want a one-line message, got: $(cat "$dir/err")"; failures=$((failures + 1))
  else
    echo "ok: $what (exit $got)"; passes=$((passes + 1))
  fi
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
"$simba" lock held -- sleep 3 &
sleep 0.5
expect 124 "timed out waiting" -- "$simba" lock --timeout 300ms held -- true
grep -q "held" "$dir/err" || { echo "FAIL: timeout message does not name the mutex"; failures=$((failures + 1)); }
expect 0 "status while held" -- "$simba" status held --json
grep -q '"owner":"' "$dir/out" || { echo "FAIL: status does not show the owner: $(cat "$dir/out")"; failures=$((failures + 1)); }
wait
# A lost lease: SIGSTOP the simba process past its lease, then SIGCONT: it must see that the
# lease ran out, terminate the command and exit 75.
"$simba" lock stall -- sleep 30 2>"$dir/stall.err" &
holder=$!
sleep 0.5
kill -STOP "$holder"
sleep 2
kill -CONT "$holder"
wait "$holder"; got=$?
if [ "$got" -eq 75 ] && grep -q "lost the lease" "$dir/stall.err"; then
  echo "ok: lease lost while running (exit 75)"; passes=$((passes + 1))
else
  echo "FAIL: lease lost: exit $got, stderr: $(cat "$dir/stall.err")"; failures=$((failures + 1))
fi
touch "$dir/not-executable"
expect 126 "command not executable" -- "$simba" lock m -- "$dir/not-executable"
# One table: --help lists every exit code the README's table has, and no other.
readme=$(dirname "$0")/../README.md
"$simba" --help > "$dir/help" 2>&1
readme_codes=$(sed -n '/^| exit code | meaning |/,/^$/p' "$readme" | grep -oE '^\| [0-9]+( / [0-9]+)? ' | grep -oE '[0-9]+' | sort -n | tr '\n' ' ')
help_codes=$(grep -oE '^  [0-9]+  ' "$dir/help" | tr -d ' ' | sort -n | tr '\n' ' ')
if [ -n "$help_codes" ] && [ "$readme_codes" = "$help_codes" ]; then
  echo "ok: --help and the README list the same exit codes ($help_codes)"; passes=$((passes + 1))
else
  echo "FAIL: exit codes: README '$readme_codes', --help '$help_codes'"; failures=$((failures + 1))
fi
echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
