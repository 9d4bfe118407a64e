# Sourced by the CLI process tests on SQLite (after they set $dir, their temporary folder):
# expect (an exact exit code, and one line on stderr for simba's own failures), check (any
# condition), wait_for and wait_gone; they count passes and failures.
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
# check DESCRIPTION CONDITION...: a pass if the condition (a command) holds.
check() {
  local what=$1; shift
  if "$@"; then echo "ok: $what"; passes=$((passes + 1)); else echo "FAIL: $what"; failures=$((failures + 1)); fi
}
# wait_for SECONDS COMMAND...: true once the command succeeds, within SECONDS (polled every 50 ms).
wait_for() {
  local i limit=$(($1 * 20)); shift
  for ((i = 0; i < limit; i++)); do "$@" && return 0; sleep 0.05; done
  return 1
}
# wait_gone PID SECONDS: true once PID has exited (reaped by us or not), within SECONDS.
wait_gone() { wait_for "$2" bash -c "! kill -0 $1 2>/dev/null"; }
# first_round_ms ARGS...: a timeout that outlasts a `simba lock`'s first round: four times
# what one `simba status ARGS` took just now (a process start, a connect and a read of the
# record), and at least 300 ms.
first_round_ms() {
  local started took
  started=$(date +%s%3N)
  "$simba" status "$@" >/dev/null 2>&1
  took=$(($(date +%s%3N) - started))
  echo $((4 * took > 300 ? 4 * took : 300))
}
# wait_held MUTEX [ARGS...]: true once `simba status` shows MUTEX owned, within 10 s.
wait_held() { wait_for 10 bash -c "'$simba' status --json $* | grep -q '\"owner\":\"'"; }
