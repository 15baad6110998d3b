#!/usr/bin/env bash
# Every Markdown table in the docs has a header row, a separator row under
# it and rows of the header's width, so an edit that drops a table's head
# (or cuts a row) fails here instead of rendering as a paragraph.
#   docs_tables.sh SOURCE_DIR
set -euo pipefail
shopt -s nullglob
cd "$1"
status=0
for f in README.md */README.md docs/*.md; do
  awk -v file="$f" '
    function cells(s,   t) { t = s; gsub(/\\\|/, "", t); gsub(/`[^`]*`/, "x", t); return gsub(/\|/, "|", t) - 1 }
    /^```/ { fence = !fence }
    fence { next }
    /^\|/ {
      n = cells($0)
      if (!in_table) {
        in_table = 1; head = n; line = NR
        if ((getline sep) <= 0 || sep !~ /^\|( *:?-+:? *\|)+ *$/) { printf "%s:%d: a table without a separator row under its header\n", file, NR; bad = 1; in_table = 0; next }
        if (cells(sep) != head) { printf "%s:%d: the separator has %d columns, the header %d\n", file, NR + 1, cells(sep), head; bad = 1 }
        next
      }
      if (n != head) { printf "%s:%d: a row of %d columns in a table of %d (line %d)\n", file, NR, n, head, line; bad = 1 }
      next
    }
    { in_table = 0 }
    END { exit bad }
  ' "$f" || status=1
done
exit $status
