#!/usr/bin/env bash
# The README's engine table against the engines of the source tree (their manifests,
# src/backends/<name>/engine.env): one row per engine, in the manifests' order, each row
# starting with its engine's ENGINE_TITLE. A new engine folder without its row fails here.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/deps.sh"

# The first cells of the table under "## Engines", header and rule left out.
mapfile -t rows < <(awk '/^## Engines/ { on = 1; next } on && /^## / { exit }
                         on && /^\|/ { print }' "$root/README.md" | tail -n +3 |
                     sed -E 's/^\| *([^|]*[^| ]) *\|.*/\1/')
# The manifests in ENGINE_ORDER.
mapfile -t engines < <(for engine in $(simba_engine_names); do
                         printf '%s %s\n' "$(simba_engine_value "$engine" ENGINE_ORDER)" "$engine"
                       done | sort -n | cut -d' ' -f2)

failed=0
if [ "${#rows[@]}" -ne "${#engines[@]}" ]; then
  echo "FAIL: the README's engine table has ${#rows[@]} rows, the source tree ${#engines[@]} engines (${engines[*]})"
  failed=1
fi
for i in "${!engines[@]}"; do
  title=$(simba_engine_value "${engines[$i]}" ENGINE_TITLE)
  row=${rows[$i]:-<no row>}
  if [ -z "$title" ]; then
    echo "FAIL: src/backends/${engines[$i]}/engine.env has no ENGINE_TITLE"
    failed=1
  elif [[ "$row" != "$title"* ]]; then
    echo "FAIL: row $((i + 1)) of the README's engine table is '$row'; engine ${engines[$i]} (ENGINE_TITLE '$title') belongs there"
    failed=1
  else
    echo "ok: ${engines[$i]}: $row"
  fi
done
exit "$failed"
