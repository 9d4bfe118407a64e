#!/usr/bin/env bash
# Run by src/backends/etcd/test_server.sh. simba, `etcdctl lock` and `etcdctl elect` (Debian's
# etcd-client, etcd's own recipes) on one name: they exclude each other on a fenced register
# (no stale, shared or interleaved write), both sides get turns, `etcdctl elect -l` shows
# simba's leader, simba shows an etcdctl leader's proposal as the owner, and nothing is left
# behind.
#   cli_etcd_test.sh SIMBA SIMBA-FENCED-REGISTER
set -uo pipefail
simba=$(realpath "${1:?usage: cli_etcd_test.sh path/to/simba path/to/simba-fenced-register}")
register=$(realpath "${2:?}")
uri="${SIMBA_TEST_ETCD_URI:?run me through src/backends/etcd/test_server.sh}?prefix=simba"
source "$(dirname "$0")/cli_lib.sh"
export ETCDCTL_API=3
ctl() { etcdctl --endpoints="127.0.0.1:$SIMBA_TEST_ETCD_PORT" "$@"; }
name="etcdctl-$$-$RANDOM"  # no '/': the same key for both sides (simba/<name>/<lease>)
log=$work/register

# --- lock: three simba processes and three etcdctl processes, four sections each.
# etcdctl's command finds its key in $ETCD_LOCK_KEY; its fencing token, as simba's, is that
# key's create revision (etcdctl's own ETCD_LOCK_REV is the revision when it got the lock,
# which a waiter's older key can be below).
cat >etcdctl-section <<SH
#!/usr/bin/env bash
export SIMBA_FENCING_TOKEN=\$(etcdctl --endpoints=127.0.0.1:$SIMBA_TEST_ETCD_PORT get "\$ETCD_LOCK_KEY" -w fields |
                             sed -n 's/^"CreateRevision" : //p')
exec "$register" section "$log" --writes 4 --interval 10
SH
chmod +x etcdctl-section
for n in 1 2 3; do
  (for _ in 1 2 3 4; do
     "$simba" lock --backend "$uri" --ttl 2s --transition 1s --timeout 60s "$name" -- \
       "$register" section "$log" --writes 4 --interval 10 && echo ok >>"simba-$n.done"
   done) &
  (for _ in 1 2 3 4; do
     ctl lock --ttl 2 "simba/$name" ./etcdctl-section >/dev/null && echo ok >>"etcdctl-$n.done"
   done) &
done
wait
result=$("$register" check "$log" --min-sections 24 --writes 4)
rc=$?
echo "register: $result"
[ "$rc" -eq 0 ] || fail "the register saw a stale, shared or interleaved write, or fewer than 24 sections: $result"
simba_turns=$(cat simba-*.done 2>/dev/null | wc -l)
etcdctl_turns=$(cat etcdctl-*.done 2>/dev/null | wc -l)
[ "$simba_turns" -eq 12 ] || fail "simba completed $simba_turns of 12 sections"
[ "$etcdctl_turns" -eq 12 ] || fail "etcdctl lock completed $etcdctl_turns of 12 sections"
left=$(ctl get --prefix --keys-only "simba/$name/" | sed '/^$/d')
[ -z "$left" ] || fail "keys left behind: $left"

# --- elect: a simba leader shows in `etcdctl elect -l`; an etcdctl leader in `simba status`.
set -m
"$simba" leader --backend "$uri" --ttl 2s --transition 1s "$name-a" -- sleep 60 &
leader=$!
set +m
for _ in $(seq 100); do
  "$simba" status --backend "$uri" --json "$name-a" >status.json 2>/dev/null && grep -q "\"owner\":\"[^\"]*:$leader@" status.json && break
  sleep 0.1
done
grep -q "\"owner\":\"[^\"]*:$leader@" status.json || fail "simba leader never led: $(cat status.json)"
# elect -l prints the leader, then listens on: ended once it printed (or after 20 s).
etcdctl --endpoints="127.0.0.1:$SIMBA_TEST_ETCD_PORT" elect -l "simba/$name-a" >elect.txt 2>&1 &
listener=$!
for _ in $(seq 200); do grep -q ":$leader@" elect.txt && break; sleep 0.1; done
kill "$listener" 2>/dev/null; wait "$listener" 2>/dev/null
grep -q ":$leader@" elect.txt || fail "etcdctl elect -l does not show simba's leader: $(cat elect.txt)"
kill -TERM -- "-$leader"
timeout 20 tail --pid="$leader" -f /dev/null || { kill -9 -- "-$leader"; fail "simba leader did not stop on SIGTERM"; }

etcdctl --endpoints="127.0.0.1:$SIMBA_TEST_ETCD_PORT" elect "simba/$name-b" "go-proposal-$$" >/dev/null 2>&1 &
elector=$!
for _ in $(seq 100); do
  "$simba" status --backend "$uri" --json "$name-b" >status.json 2>/dev/null && grep -q "\"owner\":\"go-proposal-$$\"" status.json && break
  sleep 0.1
done
grep -q "\"owner\":\"go-proposal-$$\"" status.json || fail "simba status does not show etcdctl's leader: $(cat status.json)"
"$simba" list --backend "$uri" "$name-b" >list.txt 2>&1
grep -q "go-proposal-$$" list.txt || fail "simba list does not show etcdctl's leader: $(cat list.txt)"
# While etcdctl leads, simba waits; when it goes, simba leads.
# (a short lease: a key it may leave if its claim was still under way at the timeout lapses soon)
"$simba" lock --backend "$uri" --ttl 1s --transition 500ms --timeout 300ms "$name-b" -- true 2>err.txt
[ $? -eq 124 ] || fail "simba lock got a mutex etcdctl elect leads"
kill -INT "$elector"
timeout 10 tail --pid="$elector" -f /dev/null || { kill -9 "$elector"; fail "etcdctl elect did not resign on SIGINT"; }
"$simba" lock --backend "$uri" --timeout 20s "$name-b" -- true || fail "simba lock after etcdctl's leader resigned: exit $?"
left=$(ctl get --prefix --keys-only "simba/$name-" | sed '/^$/d' | grep -v "^simba/$name-[ab]\$")
[ -z "$left" ] || fail "keys left behind: $left"
finish
