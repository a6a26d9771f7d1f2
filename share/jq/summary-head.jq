# The head of summary.txt: model, machine, the capture's totals, every
# per-tile limit with its worst tile (and phase or step), the bound and
# the floors (formats/capture.md, "Floors" and "The bound"): the model's
# bound and this plan's movement floor beside the total, the phases'
# floors beside the exchange.
#   jq -r -f share/jq/summary-head.jq capture.json
def over(x; lim): if x > lim then "OVER" else "ok" end;
def commas: tostring | if length > 3 then (.[:-3] | commas) + "," + .[-3:] else . end;
def dec3: (. * 1000 | round) as $t | "\($t / 1000 | floor).\(($t % 1000) + 1000 | tostring | .[1:])";
# n in the unit u ("M" millions, "K" thousands, "" cycles), one decimal
def short(u): if u == "" then tostring
	else (. / (if u == "M" then 100000 else 100 end) | round) as $t | "\($t / 10 | floor).\($t % 10)\(u)" end;
.summary as $s | .machine as $m |
"model \(.model) on \($m.name) (\($m.tiles) tiles)",
"phases run \($s.phases), transfers \($s.transfers | commas), bytes sent \($s.bytes | commas) (each send once, however many tiles receive it)",
"max row bytes \($s.max_row_bytes)",
"tables per tile: max \($s.max_table_bytes) (tile \($s.max_table_tile), largest row in phase \($s.max_table_phase)), median \($s.median_table_bytes), against the budget \($m.table_budget_bytes): \(over($s.max_table_bytes; $m.table_budget_bytes))",
"fragments per tile: max \($s.max_fragments) (tile \($s.max_fragments_tile), most in phase \($s.max_fragments_phase)) against the limit \($m.fragment_limit): \(over($s.max_fragments; $m.fragment_limit))",
"SRAM per tile: tensors at their peak max \($s.max_tensor_bytes) (tile \($s.max_tensor_tile), step \($s.max_tensor_step)); with tables max \($s.max_sram_bytes) (tile \($s.max_sram_tile)) against \($m.available_bytes) available: \(over($s.max_sram_bytes; $m.available_bytes))",
"modelled cycles: compute \($s.compute_cycles), exchange \($s.exchange_cycles), sync \($s.sync_cycles), local copies \($s.local_copy_cycles), total \($s.total_cycles)",
# (a machine without a clock, or a capture before version 6: no time line)
($s.microseconds // empty | . as $us |
"time at \($m.clock_hz / 1e9 | tostring) GHz: \($us | dec3) us per run\($s.throughput // empty | ", \(.per_second | round | commas) \(.unit)")"),
# the bound (version 7): no plan of this model on this machine runs faster
($s.bound // empty | . as $b | ($b.bound_cycles | if . >= 1000000 then "M" elif . >= 1000 then "K" else "" end) as $u |
"bound: \($b.bound_cycles | commas) cycles (compute \($b.bound_compute_cycles | short($u)), matmul calls \($b.bound_calls_cycles | short($u)), sync \($b.bound_sync_cycles | short($u)), movement \($b.bound_movement_cycles | short($u))); \(if $b.ratio == null then "no ratio (the bound is 0)" else "total is \($b.ratio | dec3)x the bound" end)"),
# this plan's movement floor (version 7; version 5 and 6 called it floor):
# an efficiency figure that grows when the plan moves more, not a bound
(($s.plan_floor // $s.floor) // empty | . as $f | ($f.total_floor_cycles | if . >= 1000000 then "M" elif . >= 1000 then "K" else "" end) as $u |
"this plan's movement floor: \($f.total_floor_cycles | commas) cycles (compute \($f.compute_floor_cycles | short($u)), its movement \($f.movement_floor_cycles | short($u)), sync \($f.sync_floor_cycles | short($u))); \(if $f.ratio == null then "no ratio (the floor is 0)" else "total is \($f.ratio | dec3)x it" end)"),
($s.exchange_floor_cycles // empty |
"exchange: \($s.exchange_cycles | commas) cycles, \(if $s.exchange_floor_ratio == null then "no ratio (the per-phase floors are 0)" else "\($s.exchange_floor_ratio | dec3)x the per-phase floors" end) (\($s.exchange_floor_cycles | commas) cycles)")
