#!/usr/bin/env bash
# fuzz/run.sh BUILD_DIR SECONDS: runs every fuzz target of BUILD_DIR for SECONDS, three at a time,
# on its seed corpus (fuzz/corpus/<target>, read only: new inputs go to a temporary folder),
# after replaying the crashes found before (fuzz/regressions/<target>). Fails on any crash.
set -uo pipefail
build=${1:?usage: fuzz/run.sh BUILD_DIR SECONDS}
seconds=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
run_one() {
  local target=$1 name=${1#simba-fuzz-}
  local binary="$build/bin/$target"
  [ -x "$binary" ] || binary=$(find "$build" -name "$target" -type f -perm -u+x | head -n 1)
  if [ -d "$here/regressions/$name" ] && ! "$binary" "$here/regressions/$name"/* > "$work/$name.replay" 2>&1; then
    echo "fuzz: $name: a regression case crashes again"; tail -30 "$work/$name.replay"; return 1
  fi
  mkdir -p "$work/$name"
  if "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/$name-" \
       -print_final_stats=1 "$work/$name" "$here/corpus/$name" > "$work/$name.log" 2>&1; then
    echo "fuzz: $name: $(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$work/$name.log" | grep -oE '[0-9]+$') runs, no crash"
  else
    echo "fuzz: $name: CRASH"; tail -40 "$work/$name.log"
    for artifact in "$work/$name"-*; do [ -e "$artifact" ] && echo "input: $(base64 -w0 < "$artifact")"; done
    return 1
  fi
}
targets=(simba-fuzz-uri simba-fuzz-duration simba-fuzz-zookeeper_names simba-fuzz-redis_reply simba-fuzz-etcd_names)
for ((i = 0; i < ${#targets[@]}; i += 3)); do
  pids=()
  for target in "${targets[@]:i:3}"; do run_one "$target" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
done
exit $status
