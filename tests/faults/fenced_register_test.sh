#!/usr/bin/env bash
# The chaos test's checker on logs written here: it must find what it claims to find (more
# holders at once than permits, a stale write on a slot, an interleaving on a slot) and pass
# a log without them; what the chaos runs rely on, shown failing.
#
#   fenced_register_test.sh REGISTER
set -uo pipefail
register=${1:?usage: fenced_register_test.sh path/to/simba-fenced-register}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
# expect RC PERMITS FIGURE LOG: the check of LOG exits RC and its line has FIGURE.
expect() {
  local want=$1 permits=$2 figure=$3 out rc
  printf '%b' "$4" > "$dir/log"
  out=$("$register" check "$dir/log" --writes 1 --permits "$permits")
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -q "$figure" <<<"$out"; then
    echo "FAIL: want exit $want and $figure with --permits $permits, got $rc: $out"
    failures=$((failures + 1))
  fi
}
# Holders 100 (slot 0), 101 (slot 1) and 102 (slot 2) all in between lines 1 and 4.
three='5 100 0 accepted 0\n7 101 0 accepted 1\n9 102 0 accepted 2\n5 100 1 accepted 0\n7 101 1 accepted 1\n9 102 1 accepted 2\n'
expect 1 2 '"most_holders_at_once":3' "$three"
expect 0 3 '"most_holders_at_once":3' "$three"
# One after another on one slot: one at a time.
expect 0 1 '"most_holders_at_once":1' '5 100 0 accepted 0\n5 100 1 accepted 0\n6 101 0 accepted 0\n'
# A write on slot 0 with a token below one accepted there before: stale; on another slot it is not.
expect 1 2 '"stale_accepted":1' '6 100 0 accepted 0\n5 101 0 accepted 0\n'
expect 0 2 '"stale_accepted":0' '6 100 0 accepted 0\n5 101 0 accepted 1\n'
# Holder 100 writes again on slot 0 after 101 did: interleaved.
expect 1 2 '"interleaved":1' '5 100 0 accepted 0\n6 101 0 accepted 0\n5 100 1 accepted 0\n'
# The same token for two holders of one slot: shared.
expect 1 2 '"shared_tokens":1' '5 100 0 accepted 0\n5 101 0 accepted 0\n'
[ "$failures" -eq 0 ] && echo "PASS: the checker finds each violation and passes a clean log"
[ "$failures" -eq 0 ]
