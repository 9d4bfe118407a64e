#!/usr/bin/env bash
# run_and_expect.sh PATTERN COMMAND...: runs COMMAND and passes only if it exits 0 and a line of
# its output (stdout and stderr) matches PATTERN (grep -E). ctest's PASS_REGULAR_EXPRESSION
# alone would pass a program that printed the line and then failed.
# run_and_expect.sh -e PATTERN [-e PATTERN...] COMMAND...: each PATTERN must match a line.
set -uo pipefail
patterns=()
while [ "${1:-}" = "-e" ]; do
  patterns+=("$2")
  shift 2
done
if [ "${#patterns[@]}" -eq 0 ]; then
  patterns=("$1")
  shift
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "run_and_expect.sh: '$1' exited with $rc"
  exit 1
fi
for pattern in "${patterns[@]}"; do
  if ! grep -Eq -- "$pattern" "$out"; then
    echo "run_and_expect.sh: no line of '$1' matched '$pattern'"
    exit 1
  fi
done
