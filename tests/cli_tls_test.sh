#!/usr/bin/env bash
# TLS to a server that takes TLS only (src/backends/postgres/test_server.sh / src/backends/mysql/test_server.sh under
# SIMBA_TEST_TLS=1): the right CA connects, another CA is refused naming the certificate
# problem, and a connection without TLS is refused; each refusal is one line.
#   cli_tls_test.sh SIMBA GOOD_URI WRONG_CA_URI PLAIN_URI
simba=$1 good=$2 wrong=$3 plain=$4
source "$(dirname "$0")/cli_lib.sh"
status() { SIMBA_BACKEND="$1" "$simba" status tls-check >out.txt 2>err.txt; }
status "$good" || fail "status over TLS with the right CA: exit $?: $(cat err.txt)"
status "$wrong"
rc=$?
[ "$rc" -eq 69 ] || fail "a server certificate from another CA: exit $rc, want 69"
grep -qi "certificate" err.txt || fail "the refusal does not name the certificate: $(cat err.txt)"
[ "$(wc -l < err.txt)" -eq 1 ] || fail "want one line, got: $(cat err.txt)"
status "$plain"
rc=$?
[ "$rc" -eq 69 ] || [ "$rc" -eq 77 ] || fail "a connection without TLS: exit $rc, want 69 or 77"
[ "$(wc -l < err.txt)" -eq 1 ] || fail "want one line, got: $(cat err.txt)"
finish
