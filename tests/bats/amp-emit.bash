# Loaded by the amp-emit suites (amp-emit*.bats), after common and stages:
# the stages and programs they share, and their helpers.
load fixtures

# emit_fixtures NAME...: the stages a suite's tests read, made in
# $BATS_FILE_TMPDIR once per run (fixtures.bash); every variable below is
# exported, made or not. tiny: tiny-mlp (TINY) with its program
# (TINY_PROG), listing (TINY_LIST) and capture (TINY_CAPTURE); siglip:
# siglip-mlp (SIGLIP), not under the sanitizers; siglip-program: it and its
# program (SIGLIP_PROG: siglip-mlp needs more than the default table
# budget).
emit_fixtures() {
	local d=$BATS_FILE_TMPDIR amp=$MACHINES/amp1472.yaml f
	export TINY=$d/tiny.yaml SIGLIP=$d/siglip.yaml
	export TINY_PROG=$d/tiny.amp SIGLIP_PROG=$d/siglip.amp
	export TINY_LIST=$d/tiny.list TINY_CAPTURE=$d/tiny.json
	for f in "$@"; do
		case $f in
		tiny)
			fixture tiny.yaml stage_on "$amp" "$MODELS/tiny-mlp.yaml" &&
				fixture tiny.amp written amp-emit --no-model "$TINY" &&
				fixture tiny.list listed "$TINY" &&
				fixture tiny.json written amp-capture "$TINY" || return 1 ;;
		siglip | siglip-program)
			[ -z "${AMP_SAN:-}" ] || continue
			fixture siglip.yaml stage_on "$amp" "$MODELS/siglip-mlp.yaml" || return 1
			[ "$f" = siglip ] ||
				fixture siglip.amp written amp-emit --no-model --table-budget 200000 "$SIGLIP" || return 1 ;;
		*)
			echo "emit_fixtures: no fixture '$f'" >&2
			return 1 ;;
		esac
	done
}

# sections PROGRAM: "id encoding offset size" per section-table entry.
sections() {
	local n i
	n=$(field "$1" 12 4)
	for ((i = 0; i < n; i++)); do
		echo "$(field "$1" $((16 + 24 * i)) 4) $(field "$1" $((20 + 24 * i)) 4)" \
			"$(field "$1" $((24 + 24 * i)) 8) $(field "$1" $((32 + 24 * i)) 8)"
	done
}

# section PROGRAM ID OUT: section ID's stored bytes into OUT.
section() {
	local id enc off size
	while read -r id enc off size; do
		if [ "$id" = "$2" ]; then
			tail -c +$((off + 1)) "$1" | head -c "$size" > "$3"
			return 0
		fi
	done < <(sections "$1")
	return 1
}

# rows LISTING: "tile phase bytes instructions" per row of an --list text.
rows() {
	awk '/^tile / { print $2, $4, $6, $8 }' "$1"
}
