# The movement classes with the largest receiver payload, largest first.
#   jq -r --argjson n 10 -f share/jq/top-classes.jq capture.json
# ($n defaults to 10.)
($ARGS.named.n // 10) as $n |
[.phase_traffic | to_entries[] | .key as $p | .value[] | . + {phase: ($p | tonumber)}]
| sort_by(-.receiver_payload_bytes, .phase, .step) | .[:$n][] |
  [.phase, "\(.op).\(.operand)", .tensor, .movement, .sends,
   .receiver_payload_bytes, .replication] | @tsv
