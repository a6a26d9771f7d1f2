# One line per op, in program order: its modelled compute, exchange, sync,
# local-copy and total cycles (a phase serving several ops is split by the
# bytes each moves in it; formats/capture.md).
#   jq -r -f share/jq/op-table.jq capture.json
.ops[] | [.op, .compute_cycles, .exchange_cycles, .sync_cycles, .local_copy_cycles,
          .total_cycles] | @tsv
