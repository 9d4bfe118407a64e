#!/usr/bin/env bash
# Eight `simba lock --permits 3` processes on one SQLite file: never more than three inside at
# once, each inside its own slot (SIMBA_PERMIT), all eight ran, and nothing is left held.
# Then `simba status` and `simba watch` of the semaphore while two hold, the usage errors: --permits 0, and a
# signal while waiting (exit 130, nothing taken).
set -euo pipefail
simba=${1:?usage: cli_permits_test.sh path/to/simba}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export SIMBA_BACKEND="sqlite://$dir/locks.db?ttl=2s&transition=1s"

# Inside: one entry in $DIR/in per process; a fourth at once is an overlap. A slot taken twice
# at once (mkdir of the slot's folder fails) is one too.
critical='
  if ! mkdir "$DIR/slot-$SIMBA_PERMIT" 2>/dev/null; then echo "SLOT TWICE $SIMBA_PERMIT" >> "$DIR/log"; fi
  touch "$DIR/in/$$"
  n=$(ls "$DIR/in" | wc -l)
  if [ "$n" -gt 3 ]; then echo "OVERLAP $n" >> "$DIR/log"; fi
  echo "ran $SIMBA_PERMIT of $SIMBA_PERMITS token $SIMBA_FENCING_TOKEN" >> "$DIR/log"
  sleep 0.2
  rm "$DIR/in/$$"
  rmdir "$DIR/slot-$SIMBA_PERMIT"'
mkdir "$dir/in"
pids=()
for i in 1 2 3 4 5 6 7 8; do
  DIR=$dir "$simba" lock --permits 3 --timeout 60s pool -- sh -c "$critical" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

if grep -q "OVERLAP\|TWICE" "$dir/log"; then echo "FAIL: more than 3 inside"; cat "$dir/log"; exit 1; fi
ran=$(grep -c "^ran [012] of 3 token [0-9]" "$dir/log")
[ "$ran" -eq 8 ] || { echo "FAIL: $ran ran, want 8"; cat "$dir/log"; exit 1; }
for slot in 0 1 2; do
  "$simba" status "pool#${slot}of3" --json | grep -q '"owner":null' ||
    { echo "FAIL: slot $slot was left held"; exit 1; }
done

# `simba status` of a semaphore: its permits and every holder, as text and JSON.
export DIR=$dir
for i in 1 2; do
  "$simba" lock --permits 3 --timeout 30s held -- sh -c 'touch "$DIR/held-$SIMBA_PERMIT"; while [ ! -e "$DIR/go" ]; do sleep 0.05; done' &
  pids+=($!)
done
for _ in $(seq 200); do [ "$(ls "$dir" | grep -c '^held-')" -eq 2 ] && break; sleep 0.1; done
status=$("$simba" status held)
json=$("$simba" status held --json)
# `simba watch` of the semaphore: a line per slot, then one as each holder lets go.
"$simba" watch held > "$dir/watch" 2>&1 &
watcher=$!
for _ in $(seq 200); do [ "$(grep -c '  held#[012]of3  ' "$dir/watch")" -ge 3 ] && break; sleep 0.1; done
touch "$dir/go"
for pid in "${pids[@]:8}"; do wait "$pid"; done
for _ in $(seq 200); do [ "$(grep -c '  held#[012]of3  free  ' "$dir/watch")" -ge 3 ] && break; sleep 0.1; done
kill -INT "$watcher"
wait "$watcher" || { echo "FAIL: simba watch did not exit 0 on SIGINT"; exit 1; }
[ "$(grep -c '  held#[012]of3  owner ' "$dir/watch")" -eq 2 ] && [ "$(grep -c '  held#[012]of3  free  ' "$dir/watch")" -eq 3 ] ||
  { echo "FAIL: simba watch of a semaphore with 2 of 3 permits held, then released:"; cat "$dir/watch"; exit 1; }
grep -q "^permits: *3 (2 held, 1 free)$" <<<"$status" && [ "$(grep -c '^permit [012]: ' <<<"$status")" -eq 2 ] ||
  { echo "FAIL: status of a semaphore with 2 of 3 permits held:"; echo "$status"; exit 1; }
grep -q '"semaphores":\[{"held":2,"permits":3,' <<<"$json" ||
  { echo "FAIL: status --json of a semaphore with 2 of 3 permits held: $json"; exit 1; }

rc=0
"$simba" lock --permits 0 pool -- true 2>"$dir/err" || rc=$?
[ "$rc" -eq 64 ] && grep -q -- "--permits must be 1 or more" "$dir/err" ||
  { echo "FAIL: --permits 0 gave $rc: $(cat "$dir/err")"; exit 1; }

# A signal while waiting: exit 130, and the waiter takes nothing after the holder lets go.
"$simba" lock --permits 1 --timeout 30s busy -- sh -c 'while [ ! -e "$DIR/go-busy" ]; do sleep 0.05; done' &
holder=$!
for _ in $(seq 100); do
  "$simba" status busy#0of1 --json | grep -q '"owner":null' || break
  sleep 0.1
done
"$simba" lock --permits 1 --timeout 30s busy -- touch "$dir/ran" &
waiter=$!
# The waiter asked: `simba status` says the one permit is asked for (up to 20 s).
for _ in $(seq 200); do "$simba" status busy | grep -q "^waiting: *yes: 1 of the held permits" && break; sleep 0.1; done
"$simba" status busy | grep -q "^waiting: *yes: 1 of the held permits" ||
  { echo "FAIL: status of a full semaphore with a waiter:"; "$simba" status busy; touch "$dir/go-busy"; exit 1; }
kill -INT "$waiter"
rc=0
wait "$waiter" || rc=$?
touch "$dir/go-busy"
[ "$rc" -eq 130 ] || { echo "FAIL: the interrupted waiter exited $rc, want 130"; exit 1; }
wait "$holder"
sleep 0.5
[ ! -e "$dir/ran" ] || { echo "FAIL: the interrupted waiter ran its command"; exit 1; }
"$simba" status busy#0of1 --json | grep -q '"owner":null' ||
  { echo "FAIL: the interrupted waiter left a permit held"; exit 1; }
echo "PASS: 8 processes through 3 permits; --permits 0 refused; an interrupted waiter took nothing"
