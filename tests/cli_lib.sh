# Sourced by the CLI server tests (tests/cli_*_test.sh), after they set $simba (the CLI):
# failure counting, a private work folder, and the checks they share.
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
work=$(mktemp -d)  # files of its own: CLI tests run in parallel
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

# expect_held_by URI MUTEX HOLDER: while HOLDER (a grep pattern matching its contender id
# from the start) owns MUTEX, `simba lock` gives up with exit 124 naming it (its timeout four
# times what a `simba status` took just now), and `simba status --json` shows it
# (its output is left in status.json).
expect_held_by() {
  local bound started took
  started=$(date +%s%3N)
  "$simba" status --backend "$1" "$2" >/dev/null 2>&1
  took=$(($(date +%s%3N) - started))
  bound=$((4 * took > 300 ? 4 * took : 300))  # outlasts a first round, which learns the holder
  "$simba" lock --backend "$1" --timeout "${bound}ms" "$2" -- true 2>err.txt
  local rc=$?
  [ "$rc" -eq 124 ] || fail "simba lock while $3 holds: exit $rc, want 124"
  grep -q "$3" err.txt || fail "the timeout message does not name $3: $(cat err.txt)"
  "$simba" status --backend "$1" --json "$2" > status.json || fail "simba status failed"
  grep -q "\"owner\":\"$3" status.json || fail "status does not show $3: $(cat status.json)"
}

# expect_secret_hidden URI MUTEX SECRET: whatever `simba status` says about URI, it never
# shows SECRET (the password in URI).
expect_secret_hidden() {
  "$simba" status --backend "$1" "$2" > out.txt 2>&1
  ! grep -q "$3" out.txt || fail "the password appeared: $(cat out.txt)"
}

# finish: the summary line, and the exit status.
finish() {
  echo "$failures failed"
  [ "$failures" -eq 0 ]
}
