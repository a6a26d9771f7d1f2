# The phase_traffic map: one line per movement class, with its phase.
#   jq -r -f share/jq/traffic-details.jq capture.json
.phase_traffic | to_entries[] | .key as $p | .value[] |
  [$p, .op, .operand, .tensor, .movement,
   "\(.src_format)/\(.src_layout) -> \(.dst_format)/\(.dst_layout)",
   .sends, .source_payload_bytes, .receiver_payload_bytes, .replication,
   .source_tiles, .receiver_tiles] | @tsv
