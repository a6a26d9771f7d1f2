# The trace's tile lanes for report.html (amp-capture --trace, formats/
# capture.md "Trace"), as one JSON object the page draws:
#   gzip -dc trace.json.gz | jq -c --argjson max 100000 -f share/report/trace.jq
# time: what ts means; total: the critical path's end (its unit);
# cats and names: the slices' categories and names, each once; tiles: the
# sampled tiles in order; lanes[i]: tile i's slices as [ts, dur, cat
# index, name index], in time order. At most $max slices in all: the lanes
# past that are left out, and dropped says how many tiles.
def cats: ["compute", "sync", "exchange", "local"];
(.traceEvents | map(select(.ph == "X" and .pid > 0))) as $x |
([$x[].name] | unique) as $names |
([$names | to_entries[] | {key: .value, value: .key}] | from_entries) as $ni |
([.traceEvents[] | select(.ph == "M" and .name == "process_name" and .pid > 0) | .pid - 1]) as $tiles |
($x | group_by(.pid) | map({key: (.[0].pid - 1 | tostring), value: map([.ts, .dur, (.cat as $c | cats | index($c)), $ni[.name]])}) | from_entries) as $by |
(reduce $tiles[] as $t ({n: 0, keep: []}; ($by[$t | tostring] // []) as $l |
	if .n + ($l | length) <= $max then .n += ($l | length) | .keep += [$t] else . end)) as $k |
{
  time: .otherData.time,
  total: ([.traceEvents[] | select(.pid == 0 and .ph == "X") | .ts + .dur] | max // 0),
  cats: cats, names: $names,
  tiles: $k.keep,
  dropped: (($tiles | length) - ($k.keep | length)),
  lanes: [$k.keep[] | $by[tostring] // []]
}
