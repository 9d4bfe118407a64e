#!/usr/bin/env bash
# ab.sh OLD_BENCH NEW_BENCH URI [ROUNDS] [WORKLOAD]: two simba-bench binaries (e.g. two builds)
# run in turn against one backend, ROUNDS rounds (default 6), and the medians of their p50s.
# One JSON line per run ("which" says old or new), then one summary line.
set -euo pipefail
old=${1:?usage: ab.sh OLD_BENCH NEW_BENCH URI [ROUNDS] [WORKLOAD]} new=${2:?} uri=${3:?} rounds=${4:-6}
workload=${5:-cycle}
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
for ((round = 1; round <= rounds; round++)); do
  for which in old new; do
    bin=$old
    [ "$which" = new ] && bin=$new
    line=$("$bin" --backend "$uri" --workload "$workload" | grep "\"workload\":\"$workload\"")
    echo "{\"which\":\"$which\",${line#\{}" | tee -a "$runs"
  done
done
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# (A line's targets also name p50_us, followed by an object: a digit after the colon marks the figure.)
p50s() { grep "\"which\":\"$1\"" "$runs" | grep -o '"p50_[nu]s":[0-9][0-9.]*' | head -n "$rounds" | cut -d: -f2; }
old_median=$(p50s old | median) new_median=$(p50s new | median)
echo "{\"workload\":\"$workload\",\"rounds\":$rounds,\"old_p50_median\":$old_median,\"new_p50_median\":$new_median,\"ratio\":$(awk -v a="$new_median" -v b="$old_median" 'BEGIN { printf "%.3f", a / b }')}"
