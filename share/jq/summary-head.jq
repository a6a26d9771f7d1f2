# The head of summary.txt: model, machine, the capture's totals and every
# per-tile limit with its worst tile (and phase or step).
#   jq -r -f share/jq/summary-head.jq capture.json
def over(x; lim): if x > lim then "OVER" else "ok" end;
.summary as $s | .machine as $m |
"model \(.model) on \($m.name) (\($m.tiles) tiles)",
"phases run \($s.phases), transfers \($s.transfers), bytes \($s.bytes)",
"max row bytes \($s.max_row_bytes)",
"tables per tile: max \($s.max_table_bytes) (tile \($s.max_table_tile), largest row in phase \($s.max_table_phase)), median \($s.median_table_bytes), against the budget \($m.table_budget_bytes): \(over($s.max_table_bytes; $m.table_budget_bytes))",
"fragments per tile: max \($s.max_fragments) (tile \($s.max_fragments_tile), most in phase \($s.max_fragments_phase)) against the limit \($m.fragment_limit): \(over($s.max_fragments; $m.fragment_limit))",
"SRAM per tile: tensors at their peak max \($s.max_tensor_bytes) (tile \($s.max_tensor_tile), step \($s.max_tensor_step)); with tables max \($s.max_sram_bytes) (tile \($s.max_sram_tile)) against \($m.available_bytes) available: \(over($s.max_sram_bytes; $m.available_bytes))",
"modelled cycles: compute \($s.compute_cycles), exchange \($s.exchange_cycles), sync \($s.sync_cycles), local copies \($s.local_copy_cycles), total \($s.total_cycles)"
