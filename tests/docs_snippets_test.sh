#!/usr/bin/env bash
# Keeps the README's and docs/'s code true to code that the suite builds and runs:
#   - every ```cpp and ```cmake block is preceded by `<!-- snippet: PATH#REGION -->` and is,
#     line for line (indentation aside), the region of PATH between two `// [REGION]` (or
#     `# [REGION]`) lines: an example the suite compiles and runs (examples/), or the consumer
#     project the packaging check builds (tests/consumer/);
#   - every `simba SUBCOMMAND ... --option` line of a ```sh block names a subcommand and
#     options that `simba SUBCOMMAND --help` lists.
#   docs_snippets_test.sh SIMBA_CLI
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cli=$1
failures=0 checked=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# region FILE NAME: the lines between the two markers of NAME, without their common indent.
region() {
  awk -v name="$2" '
    $0 ~ "^[[:space:]]*(//|#) \\[" name "\\][[:space:]]*$" { inside = !inside; found++; next }
    inside { print }
    END { if (found != 2) exit 1 }' "$1" | dedent
}
dedent() {
  awk '{ lines[NR] = $0; if ($0 ~ /[^[:space:]]/) { match($0, /^[[:space:]]*/); if (min == "" || RLENGTH < min) min = RLENGTH } }
       END { for (i = 1; i <= NR; i++) print substr(lines[i], min + 1) }'
}

# check_sh LINE: a simba command line names a subcommand and options its --help lists.
check_sh() {
  local line=$1 sub word words=()
  read -r -a words <<<"$line"
  [ "${words[0]:-}" = simba ] || return 0
  sub=${words[1]:-}
  [[ "$sub" =~ ^[a-z]+$ ]] || { fail "'$line': no subcommand"; return; }
  local help
  help=$("$cli" "$sub" --help 2>&1)
  grep -Eq "^Usage: .*simba $sub( |$)" <<<"$help" || { fail "'$line': 'simba $sub' is no subcommand"; return; }
  for word in "${words[@]:2}"; do
    [ "$word" = -- ] && break
    [[ "$word" == --* ]] || continue
    word=${word%%=*}
    grep -q -- "$word\b" <<<"$help" || fail "'$line': 'simba $sub --help' lists no $word"
  done
  checked=$((checked + 1))
}

for doc in "$root/README.md" "$root"/docs/*.md; do
  rel=${doc#"$root"/}
  snippet="" fence="" body="" number=0 start=0
  while IFS= read -r line || [ -n "$line" ]; do
    number=$((number + 1))
    if [ -n "$fence" ]; then
      if [[ "$line" == '```' ]]; then
        case $fence in
          cpp | cmake)
            if [ -z "$snippet" ]; then
              fail "$rel:$start: a $fence block with no <!-- snippet: PATH#REGION --> before it"
            elif ! expected=$(region "$root/${snippet%%#*}" "${snippet#*#}"); then
              fail "$rel:$start: ${snippet%%#*} has no region [${snippet#*#}] (two marker lines)"
            elif [ "$(printf '%s' "$body" | dedent)" != "$expected" ]; then
              fail "$rel:$start: differs from $snippet:"
              diff <(printf '%s\n' "$expected") <(printf '%s' "$body" | dedent) | sed 's/^/    /' | head -n 20
            else
              checked=$((checked + 1))
            fi
            ;;
          sh)
            while IFS= read -r shell_line; do
              shell_line=${shell_line%%#*}
              check_sh "$shell_line"
            done <<<"$body"
            ;;
        esac
        fence="" snippet="" body=""
      else
        body+="$line"$'\n'
      fi
    elif [[ "$line" =~ ^\`\`\`([a-z]*)$ ]]; then
      fence=${BASH_REMATCH[1]:-text} start=$number
    elif [[ "$line" =~ ^\<!--\ snippet:\ ([^ ]+)\ --\>$ ]]; then
      snippet=${BASH_REMATCH[1]}
    elif [ -n "$line" ]; then
      snippet=""  # a marker belongs to the block right after it
    fi
  done <"$doc"
  [ -z "$fence" ] || fail "$rel:$start: a block that never closes"
done

echo "docs: $checked blocks and command lines checked, $failures failed"
[ "$checked" -gt 0 ] && [ "$failures" -eq 0 ]
