# One line per phase: id, labels, how many times it runs (a phase in a
# repeated body runs once per iteration), and per run its transfers,
# bytes, largest row, most fragments on a tile and modelled cycles; then
# its cycles over every run, its floor over every run (formats/capture.md,
# "Floors") and its cycles / floor (3 decimals; "-" when the floor is 0).
# A last line "total" sums every run: runs (the summary's "phases run"),
# transfers, bytes, the largest row and fragments, the cycles (the
# summary's exchange cycles), the floors (its exchange_floor_cycles) and
# their ratio (its exchange_floor_ratio).
#   jq -r -f share/jq/phase-table.jq capture.json
def dec3: if . == null then "-" else (. * 1000 | round) as $t
	| "\($t / 1000 | floor).\(($t % 1000) + 1000 | tostring | .[1:])" end;
def runs(f): if f == null then "-" else f * .count end;
(.phases[] | [.id, (.labels | join("+")), .count, .transfers, .bytes, .max_row_bytes,
              .max_fragments, .cycles, .cycles * .count, runs(.floor_cycles), (.floor_ratio | dec3)]),
(.summary as $s | .phases | ["total", "-", (map(.count) | add // 0), (map(.transfers * .count) | add // 0),
            (map(.bytes * .count) | add // 0), (map(.max_row_bytes) | max // 0),
            (map(.max_fragments) | max // 0), "-", (map(.cycles * .count) | add // 0),
            (if $s.exchange_floor_cycles == null then "-" else (map(.floor_cycles * .count) | add // 0) end),
            ($s.exchange_floor_ratio | dec3)])
| @tsv
