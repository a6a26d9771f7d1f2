# One line per phase: id, labels, transfers, bytes, largest row, most
# fragments on a tile, modelled cycles.
#   jq -r -f share/jq/phase-table.jq capture.json
.phases[] | [.id, (.labels | join("+")), .transfers, .bytes, .max_row_bytes,
             .max_fragments, .cycles] | @tsv
