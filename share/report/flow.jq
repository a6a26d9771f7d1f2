# The movement classes of a capture as a Graphviz graph (make report):
# an edge from each source placement (the canonical owners of a tensor,
# a parameter's home, or a layout an op put it in) to the op's operand it
# serves, one per source, op, operand and tensor, labelled with its
# receiver payload over every run (receiver_payload_bytes x the phase's
# count, formats/capture.md), so the edges add up to the bytes every tile
# receives. Operands are in program order, top to bottom.
#   jq -r -f share/report/flow.jq capture.json | dot -Tsvg > flow.svg

# A DOT string: quoted, backslashes and quotes escaped.
def q: tostring | gsub("\\\\"; "\\\\") | gsub("\""; "\\\"") | gsub("\n"; "\\n") | "\"" + . + "\"";
# 1234567 -> "1,234,567"
def commas: tostring | [explode | reverse | _nwise(3) | reverse | implode] | reverse | join(",");
# The placement's name after the tensor's: "x@canon" -> "canon".
def place: split("@") | if length > 1 then .[-1] else "" end;
def kind: place as $p |
	if $p == "canon" then "canonical owners"
	elif $p == "home" then "parameter home"
	else "layout" end;
def colour: {"canonical owners": "#cfe2f3", "parameter home": "#fce5cd", "layout": "#e6e6e6"}[kind];

.model as $model |
(.ops | to_entries | map({key: .value.op, value: .key}) | from_entries) as $order |
(.phases | map({key: (.id | tostring), value: .count}) | from_entries) as $runs |
[.phase_traffic | to_entries[] | .key as $p | .value[] |
	. + {runs: $runs[$p], total: (.receiver_payload_bytes * $runs[$p])}] as $classes |
($classes | group_by([.src, .op, .operand, .tensor]) | map({
	src: .[0].src, op: .[0].op, operand: .[0].operand, tensor: .[0].tensor,
	movement: (map(.movement) | unique | join("+")),
	runs: (map(.runs) | unique), bytes: (map(.total) | add)})) as $edges |
(($edges | map(.bytes) | max) // 1 | if . < 1 then 1 else . end) as $max |
"digraph flow {",
"  graph [rankdir=LR, newrank=true, ranksep=1.2, nodesep=0.12, fontname=\"DejaVu Sans\", fontsize=14, labelloc=t,",
"    label=\("\($model): movement classes, source to operand, receiver payload over every run (\($edges | map(.bytes) | add // 0 | commas) bytes in all)" | q)];",
"  node [shape=box, style=\"rounded,filled\", fontname=\"DejaVu Sans\", fontsize=10, margin=\"0.08,0.03\"];",
"  edge [fontname=\"DejaVu Sans\", fontsize=9, color=\"#3d5a80\", arrowsize=0.6];",
# Sources, one node per placement, in name order.
($classes | group_by(.src)[] | .[0] |
	"  \(("src " + .src) | q) [fillcolor=\(.src | colour | q), label=\((
		if (.src | kind) == "layout"
		then "\(.tensor)\nlayout \(.src | place)\n\(.src_format)/\(.src_layout)"
		else "\(.tensor)\n\(.src | kind)" end) | q)];"),
# Operands, one node each ("op.operand"), in one rank, chained in program
# order by invisible edges so that they read top to bottom as the program
# runs (clusters per op would let dot reorder them).
($classes | map({op, operand}) | unique | sort_by($order[.op] // 1e9, .op, .operand) |
	map(("dst " + .op + "." + .operand) | q) as $ids |
	(.[] | "  \(("dst " + .op + "." + .operand) | q) [shape=ellipse, style=filled, fillcolor=white, label=\((.op + "." + .operand) | q)];"),
	"  { rank=same; \($ids | join(" ")) }",
	(if ($ids | length) > 1 then "  \($ids | join(" -> ")) [style=invis];" else empty end)),
# Edges: the movement, the bytes over every run, the runs when repeated.
($edges[] |
	"  \(("src " + .src) | q) -> \(("dst " + .op + "." + .operand) | q) [penwidth=\(
		(0.6 + 4.4 * ((.bytes / $max) | sqrt)) * 100 | floor / 100), label=\((
		"\(.movement)" +
		(if (.runs | length) == 1 and .runs[0] > 1 then ", \(.runs[0]) runs" else "" end) +
		"\n\(.bytes | commas) B") | q)];"),
"}"
