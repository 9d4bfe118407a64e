#!/usr/bin/env bash
# fuzz/run.sh BUILD_DIR [SECONDS]: runs every fuzz target of BUILD_DIR on its seed corpus
# (fuzz/corpus/<target>, read only: new inputs go to a temporary folder), after replaying the
# crashes found before (fuzz/regressions/<target>). Fails on any crash.
#   SECONDS given: each target for that long, three at a time.
#   SECONDS left out (./scripts/test): each target for its set number of inputs below, all at
#   once, so how much is fuzzed does not depend on how busy or fast the machine is; the counts
#   are about what 30 s gave each target, three at a time on this 2-core VM.
set -uo pipefail
build=${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS]}
seconds=${2:-}
if [ -n "$seconds" ] && ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz/run.sh: SECONDS must be a whole number above 0, got '$seconds'"; exit 64
fi
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
# run_one TARGET RUNS: RUNS inputs, or SECONDS when given.
run_one() {
  local target=$1 name=${1#simba-fuzz-} budget started=$SECONDS
  if [ -n "$seconds" ]; then budget=-max_total_time=$seconds; else budget=-runs=$2; fi
  local binary="$build/bin/$target"
  [ -x "$binary" ] || binary=$(find "$build" -name "$target" -type f -perm -u+x | head -n 1)
  if [ -d "$here/regressions/$name" ] && ! "$binary" "$here/regressions/$name"/* > "$work/$name.replay" 2>&1; then
    echo "fuzz: $name: a regression case crashes again"; tail -30 "$work/$name.replay"; return 1
  fi
  mkdir -p "$work/$name"
  if "$binary" "$budget" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/$name-" \
       -print_final_stats=1 "$work/$name" "$here/corpus/$name" > "$work/$name.log" 2>&1; then
    echo "fuzz: $name: $(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$work/$name.log" | grep -oE '[0-9]+$') runs in $((SECONDS - started)) s, no crash"
  else
    echo "fuzz: $name: CRASH"; tail -40 "$work/$name.log"
    for artifact in "$work/$name"-*; do [ -e "$artifact" ] && echo "input: $(base64 -w0 < "$artifact")"; done
    return 1
  fi
}
targets=(simba-fuzz-uri:500000 simba-fuzz-duration:1000000 simba-fuzz-zookeeper_names:300000
         simba-fuzz-redis_reply:500000 simba-fuzz-etcd_names:1000000)
at_once=${#targets[@]}
[ -z "$seconds" ] || at_once=3
for ((i = 0; i < ${#targets[@]}; i += at_once)); do
  pids=()
  for entry in "${targets[@]:i:at_once}"; do run_one "${entry%%:*}" "${entry#*:}" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
done
exit $status
