# The movement overview of report.html, as TSV (share/report/table.jq makes
# it a table): receiver payload over every run (receiver_payload_bytes x
# the phase's count), per movement and source kind (canonical owners, a
# parameter's home, a layout an op put it in; the colours of flow.svg),
# largest first, then the total.
#   jq -r -f share/report/movement.jq capture.json
def commas: tostring | if length > 3 then (.[:-3] | commas) + "," + .[-3:] else . end;
def kind: (split("@") | if length > 1 then .[-1] else "" end) as $p |
	if $p == "canon" then "canonical owners" elif $p == "home" then "parameter home" else "layout" end;
(.phases | map({key: (.id | tostring), value: .count}) | from_entries) as $runs |
[.phase_traffic | to_entries[] | .key as $p | .value[] |
	{movement, source: (.src | kind), sends: (.sends * $runs[$p]), bytes: (.receiver_payload_bytes * $runs[$p])}] as $c |
($c | map(.bytes) | add // 0) as $all |
def share: if $all > 0 then (. * 1000 / $all | round) as $t | "\($t / 10 | floor).\($t % 10)%" else "-" end;
($c | group_by([.movement, .source]) | map({movement: .[0].movement, source: .[0].source,
	classes: length, sends: (map(.sends) | add), bytes: (map(.bytes) | add)}) |
	sort_by(-.bytes, .movement, .source)[] |
	[.movement, .source, .classes, (.sends | commas), (.bytes | commas), (.bytes | share)]),
["total", "", ($c | length), ($c | map(.sends) | add // 0 | commas), ($all | commas), "100.0%"] | @tsv
