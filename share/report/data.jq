# What report.html draws, as one JSON object (report/data.json, inlined in
# the page for share/report/report.js):
#   jq -c --slurpfile tiles TILES.json --argjson cols C --argjson rows R \
#       -f share/report/data.jq capture.json
# TILES.json is report.sh's reading of tiles.tsv: {version, busy (true
# from tiles version 2), all: [[tile, sent, received, fragments,
# table_bytes, sram_peak_bytes]...], phases: {"ID": [[tile, sent,
# received, fragments, table_bytes, busy_cycles or null]...]}}.
#
# timeline: the program's phases and compute steps in program order (a
# phase at its first copy step), each with its cycles per run and its
# count; a phase's span on the critical path is sync + cycles + local
# copies, a compute step's its slowest tile's cycles (formats/capture.md,
# "Trace"). memory: the capture's memory object, null before it has one.
.machine as $m | .summary as $s |
{
  model,
  machine: ($m | {name, tiles, available_bytes, table_budget_bytes, fragment_limit,
    exchange_bytes_per_cycle, sync_cycles, clock_hz: (.clock_hz // null),
    clock_source: (.clock_source // null)}),
  grid: {cols: $cols, rows: $rows},
  summary: ($s | {total_cycles, compute_cycles, exchange_cycles, sync_cycles, local_copy_cycles,
    exchange_floor_cycles: (.exchange_floor_cycles // null), floor: (.floor // null),
    microseconds: (.microseconds // null), throughput: (.throughput // null)}),
  timeline: ([
    (.phases[] | {kind: "phase", id, labels, steps, count, transfers, bytes, cycles,
      sync_cycles: $m.sync_cycles, local_copy_cycles, floor_cycles: (.floor_cycles // null),
      floor_ratio: (.floor_ratio // null), floor_tile: (.floor_tile // null), at: .steps[0]}),
    (.compute[] | {kind: "compute", step, op, compute, count, tiles, slowest_tile, cycles, at: .step})
  ] | sort_by(.at, .kind) | map(del(.at))),
  # local copies of copy steps in no phase: on the path, but at no one place
  other_local_copy_cycles: ($s.local_copy_cycles - ([.phases[] | .local_copy_cycles * .count] | add // 0)),
  memory: (.memory // null),
  tiles: $tiles[0]
}
