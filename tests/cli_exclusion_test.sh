#!/usr/bin/env bash
# Six `simba lock` processes on one SQLite file: their critical sections never overlap and
# they get six distinct fencing tokens that rise in the order they ran.
set -euo pipefail
simba=${1:?usage: cli_exclusion_test.sh path/to/simba}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export SIMBA_BACKEND="sqlite://$dir/locks.db?ttl=2s&transition=1s"

critical='
  if ! mkdir "$DIR/inside" 2>/dev/null; then echo OVERLAP >> "$DIR/log"; fi
  echo "$SIMBA_FENCING_TOKEN" >> "$DIR/log"
  sleep 0.1
  rmdir "$DIR/inside"'
pids=()
for i in 1 2 3 4 5 6; do
  DIR=$dir "$simba" lock --timeout 30s exclusion -- sh -c "$critical" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

if grep -q OVERLAP "$dir/log"; then echo "FAIL: critical sections overlapped"; cat "$dir/log"; exit 1; fi
count=$(wc -l < "$dir/log")
distinct=$(sort -u "$dir/log" | wc -l)
[ "$count" -eq 6 ] || { echo "FAIL: $count critical sections ran, want 6"; exit 1; }
[ "$distinct" -eq 6 ] || { echo "FAIL: tokens not distinct"; cat "$dir/log"; exit 1; }
sort -n -c "$dir/log" || { echo "FAIL: tokens do not rise in run order"; cat "$dir/log"; exit 1; }
"$simba" status exclusion --json | grep -q '"owner":null' || { echo "FAIL: a lease was left behind"; exit 1; }
echo "PASS: 6 processes, tokens $(tr '\n' ' ' < "$dir/log")"
