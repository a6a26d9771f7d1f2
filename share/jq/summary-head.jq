# The head of summary.txt: model, machine and the capture's totals.
#   jq -r -f share/jq/summary-head.jq capture.json
"model \(.model) on \(.machine.name) (\(.machine.tiles) tiles)",
"phases \(.summary.phases), transfers \(.summary.transfers), bytes \(.summary.bytes)",
"max row bytes \(.summary.max_row_bytes); max table bytes \(.summary.max_table_bytes) (budget \(.machine.table_budget_bytes)); max fragments \(.summary.max_fragments) (limit \(.machine.fragment_limit))",
"modelled cycles: compute \(.summary.compute_cycles), exchange \(.summary.exchange_cycles), sync \(.summary.sync_cycles), local copies \(.summary.local_copy_cycles), total \(.summary.total_cycles)"
