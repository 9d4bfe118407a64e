#!/usr/bin/env bash
# The README's and docs/engines.md's engine tables against the engines of the source tree
# (their manifests, src/backends/<name>/engine.env): one row per engine, in the manifests'
# order, each row starting with its engine's ENGINE_TITLE. A new engine folder without its row
# fails here. With the CLI (docs_engines_test.sh [SIMBA]): every option an engine declares
# (simba --help lists them from the engine table) is in docs/engines.md's option table.
#   docs_engines_test.sh [SIMBA]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/deps.sh"

# first_cells FILE HEADING: the first cells of the first table under HEADING, header and rule
# left out.
first_cells() {
  awk -v heading="$2" 'index($0, heading) == 1 { on = 1; next } on && /^#/ { exit }
                       on && /^\|/ { print; table = 1; next } table { exit }' "$1" | tail -n +3 |
    sed -E 's/^\| *([^|]*[^| ]) *\|.*/\1/'
}
mapfile -t engines < <(simba_engine_names)  # in ENGINE_ORDER

failed=0
check_table() {  # check_table FILE HEADING
  local rows i title row
  mapfile -t rows < <(first_cells "$root/$1" "$2")
  if [ "${#rows[@]}" -ne "${#engines[@]}" ]; then
    echo "FAIL: $1's engine table has ${#rows[@]} rows, the source tree ${#engines[@]} engines (${engines[*]})"
    failed=1
  fi
  for i in "${!engines[@]}"; do
    title=$(simba_engine_value "${engines[$i]}" ENGINE_TITLE)
    row=${rows[$i]:-<no row>}
    if [ -z "$title" ]; then
      echo "FAIL: src/backends/${engines[$i]}/engine.env has no ENGINE_TITLE"
      failed=1
    elif [[ "$row" != "$title"* ]]; then
      echo "FAIL: row $((i + 1)) of $1's engine table is '$row'; engine ${engines[$i]} (ENGINE_TITLE '$title') belongs there"
      failed=1
    else
      echo "ok: $1: ${engines[$i]}: $row"
    fi
  done
}
check_table README.md "## Engines"
check_table docs/engines.md "# Backends"

# Every engine option of the CLI's --help in docs/engines.md's option table (as `key`).
if [ -n "${1:-}" ]; then
  options=$("$1" --help | awk '/^Backends of this build/ { on = 1; next } on && /^$/ { exit }
                               on && /^    [a-z_]+ / { print $1 }' | sort -u)
  [ -n "$options" ] || { echo "FAIL: simba --help lists no engine options"; failed=1; }
  table=$(awk '/^\| option \|/ { on = 1 } on && /^\|/ { print } on && !/^\|/ { exit }' "$root/docs/engines.md")
  for option in $options; do
    if grep -q "\`$option\`" <<<"$table"; then
      echo "ok: option $option is in docs/engines.md"
    else
      echo "FAIL: option $option (simba --help) is not in docs/engines.md's option table"
      failed=1
    fi
  done
fi
exit "$failed"
