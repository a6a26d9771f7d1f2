# The summary box of report.html (HTML): time and throughput beside the
# cycles, bytes sent against bytes received and what each counts, and the
# three per-tile limits with the worst tile.
#   jq -r -L share/report --argjson received N -f share/report/summary.jq capture.json
# N is the sum of tiles.tsv's all lines' received_bytes.
include "units";
def over(x; lim): if x > lim then "<strong class=\"over\">OVER</strong>" else "ok" end;
def us: if . == null then "" else " (\(dec(3)) µs)" end;
def row(k; v): "<tr><th>\(k)</th><td>\(v)</td></tr>";
.summary as $s | .machine as $m |
(if $m.clock_hz then 1e6 / $m.clock_hz else null end) as $uspc |
def time: if $uspc == null then "" else (. * $uspc | us) end;
def share: if $s.total_cycles > 0 then ", \(. * 1000 / $s.total_cycles | round / 10)%" else "" end;
"<table class=\"summary\">",
"<caption>Summary (every cycle figure is a model; time at the machine's clock)</caption>",
row("time per run"; if $s.microseconds != null
	then "\($s.microseconds | dec(3)) µs at \($m.clock_hz / 1e9) GHz (<span class=\"note\">\($m.clock_source // "" | @html)</span>)"
	else "no clock in the machine file: cycles only" end),
row("throughput"; if ($s.throughput // null) != null
	then "\($s.throughput.per_second | round | commas) \($s.throughput.unit | @html) (\($s.throughput.items) per run)"
	else "none without a clock" end),
row("total"; "\($s.total_cycles | cycles)\($s.total_cycles | time)"),
row("compute"; "\($s.compute_cycles | cycles)\($s.compute_cycles | time)\($s.compute_cycles | share)"),
row("exchange"; "\($s.exchange_cycles | cycles)\($s.exchange_cycles | time)\($s.exchange_cycles | share)\(
	if ($s.exchange_floor_cycles // null) != null then "; the phases' floors \($s.exchange_floor_cycles | cycles)" else "" end)"),
row("sync"; "\($s.sync_cycles | cycles)\($s.sync_cycles | time)\($s.sync_cycles | share)"),
row("local copies"; "\($s.local_copy_cycles | cycles)\($s.local_copy_cycles | time)\($s.local_copy_cycles | share)"),
(if ($s.bound // null) != null then row("bound"; "\($s.bound.bound_cycles | cycles)\($s.bound.bound_cycles | time)\(
	if $s.bound.ratio != null then "; total is \($s.bound.ratio)× the bound" else "" end): <span class=\"note\">no plan of this model on this machine runs faster: compute \($s.bound.bound_compute_cycles | cycles), matmul calls \($s.bound.bound_calls_cycles | cycles), sync \($s.bound.bound_sync_cycles | cycles), movement \($s.bound.bound_movement_cycles | cycles)</span>") else empty end),
(($s.plan_floor // $s.floor) // null | if . != null then row("this plan's movement floor"; "\(.total_floor_cycles | cycles)\(.total_floor_cycles | time)\(
	if .ratio != null then "; total is \(.ratio)× it" else "" end): <span class=\"note\">an efficiency figure: it counts this plan's own movement, so it grows when the plan moves more</span>") else empty end),
row("bytes sent"; "\($s.bytes | bytes_exact) in \($s.transfers | commas) transfers over \($s.phases) phase runs: <span class=\"note\">each send counted once, however many tiles receive it (what the senders' ports move)</span>"),
row("bytes received"; "\($received | bytes_exact)\(if $s.bytes > 0 then ", \($received / $s.bytes * 100 | round / 100)× the bytes sent" else "" end): <span class=\"note\">every receiver counted (a multicast to k tiles counts k times; what the receivers' ports move, and the movement classes' receiver payload)</span>"),
row("tables per tile"; "max \($s.max_table_bytes | bytes_exact) on tile \($s.max_table_tile), median \($s.median_table_bytes | bytes), budget \($m.table_budget_bytes | bytes_exact): \(over($s.max_table_bytes; $m.table_budget_bytes))"),
row("fragments per tile"; "max \($s.max_fragments | commas) on tile \($s.max_fragments_tile), limit \($m.fragment_limit | commas): \(over($s.max_fragments; $m.fragment_limit))"),
row("SRAM per tile"; "tensors at their peak max \($s.max_tensor_bytes | bytes_exact) (tile \($s.max_tensor_tile), step \($s.max_tensor_step)); with tables max \($s.max_sram_bytes | bytes_exact) on tile \($s.max_sram_tile), \($m.available_bytes | bytes_exact) available: \(over($s.max_sram_bytes; $m.available_bytes))"),
"</table>"
