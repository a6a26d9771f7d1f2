# One line per phase: id, labels, how many times it runs (a phase in a
# repeated body runs once per iteration), and per run its transfers,
# bytes, largest row, most fragments on a tile and modelled cycles; then
# its cycles over every run. A last line "total" sums every run: runs
# (the summary's "phases run"), transfers, bytes, the largest row and
# fragments, and the cycles (the summary's exchange cycles).
#   jq -r -f share/jq/phase-table.jq capture.json
(.phases[] | [.id, (.labels | join("+")), .count, .transfers, .bytes, .max_row_bytes,
              .max_fragments, .cycles, .cycles * .count]),
(.phases | ["total", "-", (map(.count) | add // 0), (map(.transfers * .count) | add // 0),
            (map(.bytes * .count) | add // 0), (map(.max_row_bytes) | max // 0),
            (map(.max_fragments) | max // 0), "-", (map(.cycles * .count) | add // 0)])
| @tsv
