#!/usr/bin/env bash
# `simba lock --shared` readers and a plain `simba lock` writer of one name on SQLite: two
# readers are inside at once, the writer runs only after both left, a reader that comes while
# the writer waits gets in only after the writer, and nothing is left held.
set -euo pipefail
simba=${1:?usage: cli_shared_test.sh path/to/simba}
dir=$(mktemp -d)
# On any exit: the readers are let go and every simba started here is stopped.
cleanup() {
  local rc=$? pids
  touch "$dir/go-r1" "$dir/go-r2" 2>/dev/null || true
  pids=$(jobs -p)
  [ -z "$pids" ] || kill $pids 2>/dev/null || true
  wait || true
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT
export SIMBA_BACKEND="sqlite://$dir/locks.db?ttl=2s&transition=1s"
export DIR=$dir
await() {  # await FILE: up to 20 s
  for _ in $(seq 200); do [ -e "$1" ] && return 0; sleep 0.1; done
  echo "FAIL: $1 never appeared"; exit 1
}
reader='touch "$DIR/in-$1"; echo "$1 in" >> "$DIR/log"; while [ ! -e "$DIR/go-$1" ]; do sleep 0.05; done
        echo "$1 out" >> "$DIR/log"; rm "$DIR/in-$1"'
"$simba" lock --shared cfg -- sh -c "$reader" r1 r1 &
r1=$!
"$simba" lock --shared cfg -- sh -c "$reader" r2 r2 &
r2=$!
await "$dir/in-r1"
await "$dir/in-r2"  # both inside at once: readers share
status=$("$simba" status cfg)
grep -q "^readers: *2 reading processes$" <<<"$status" && grep -q "^writer: *(free)$" <<<"$status" ||
  { echo "FAIL: status with two readers inside:"; echo "$status"; exit 1; }
writer='if ls "$DIR"/in-* >/dev/null 2>&1; then echo "W WITH READERS" >> "$DIR/log"; fi; echo "w in" >> "$DIR/log"
        sleep 0.3; echo "w out" >> "$DIR/log"'
"$simba" lock --timeout 30s cfg -- sh -c "$writer" &
w=$!
# The writer holds the mutex and waits for the readers: a new reader waits too.
for _ in $(seq 200); do
  "$simba" status cfg --json | grep -q '"owner":null' || break
  sleep 0.1
done
"$simba" lock --shared --timeout 30s cfg -- sh -c 'echo "r3 in" >> "$DIR/log"' &
r3=$!
sleep 0.5
grep -q "r3 in\|w in" "$dir/log" && { echo "FAIL: in beside the readers"; cat "$dir/log"; exit 1; }
touch "$dir/go-r1" "$dir/go-r2"
for pid in $r1 $r2 $w $r3; do wait "$pid"; done
grep -q "W WITH READERS" "$dir/log" && { echo "FAIL: the writer ran with readers inside"; cat "$dir/log"; exit 1; }
order=$(grep -o "^[a-z0-9]* in\|w out" "$dir/log" | tr '\n' ',')
case "$order" in
  *"w in,w out,r3 in,"*) ;;
  *) echo "FAIL: want the writer before the late reader: $order"; exit 1 ;;
esac
"$simba" status cfg --json | grep -q '"owner":null' || { echo "FAIL: the mutex was left held"; exit 1; }
echo "PASS: $order"
