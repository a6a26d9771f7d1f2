# Loaded by the amp-capture suites (amp-capture*.bats), after common and
# stages: the stages and captures they share, and their helpers.
load fixtures

# listing_phases LISTING: per phase of an amp-emit --list text, "phase
# sends send_bytes recv_bytes max_row_bytes max_instructions".
listing_phases() {
	awk '
	/^phase / { p = $2; n[p] = s[p] = r[p] = mr[p] = mf[p] = 0; order[++np] = p; next }
	/^tile / { p = $4; if ($6 > mr[p]) mr[p] = $6; if ($8 > mf[p]) mf[p] = $8; next }
	$1 == "send" { n[p]++; s[p] += $2; next }
	$1 == "recv" { r[p] += $2 }
	END { for (i = 1; i <= np; i++) { p = order[i]; print p, n[p], s[p], r[p], mr[p], mf[p] } }' "$1"
}

# listed_phases STAGE OUT: listing_phases of STAGE's amp-emit --list.
listed_phases() {
	amp-emit --list "$1" > "$2.list"
	listing_phases "$2.list" > "$2"
	rm -f "$2.list"
}

# capture_fixtures NAME...: the stages a suite's tests read, made in
# $BATS_FILE_TMPDIR once per run (fixtures.bash); every variable below is
# exported, made or not. tiny: tiny-mlp (TINY) with its program
# (TINY_PROG) and capture (TINY_CAPTURE); siglip: siglip-mlp (SIGLIP) with
# its capture (SIGLIP_CAPTURE) and the per-phase figures of its listing
# (SIGLIP_PHASES), not under the sanitizers; native: the small
# compose-native-fp8 stage the replay cases are written into (NATIVE);
# cost: the two pinned GEMMs of tests/models/cost-two-matmuls.yaml (on a
# 48-tile machine, where m2 shares tiles with the owners) with its capture
# (COST, COST_CAPTURE); vit: tests/models/vit-tiny.yaml (attention,
# layernorm, gelu, add, a repeat) with its capture (VIT, VIT_CAPTURE).
capture_fixtures() {
	local d=$BATS_FILE_TMPDIR amp=$MACHINES/amp1472.yaml m48=$ROOT/tests/models/machine-48.yaml f
	export TINY=$d/tiny.yaml TINY_PROG=$d/tiny.amp TINY_CAPTURE=$d/tiny.json
	export SIGLIP=$d/siglip.yaml SIGLIP_CAPTURE=$d/siglip.json SIGLIP_PHASES=$d/siglip-phases.txt
	export NATIVE=$d/native.yaml
	export COST=$d/cost.yaml COST_CAPTURE=$d/cost.json
	export VIT=$d/vit.yaml VIT_CAPTURE=$d/vit.json
	for f in "$@"; do
		case $f in
		tiny)
			fixture tiny.yaml stage_on "$amp" "$MODELS/tiny-mlp.yaml" &&
				fixture tiny.amp written amp-emit --no-model "$TINY" &&
				fixture tiny.json written amp-capture "$TINY" || return 1 ;;
		siglip)
			[ -z "${AMP_SAN:-}" ] || continue
			fixture siglip.yaml stage_on "$amp" "$MODELS/siglip-mlp.yaml" &&
				fixture siglip.json written amp-capture "$SIGLIP" &&
				fixture siglip-phases.txt listed_phases "$SIGLIP" || return 1 ;;
		native)
			fixture native.yaml stage_on "$amp" "$ROOT/tests/models/compose-native-fp8.yaml" || return 1 ;;
		cost)
			fixture cost.yaml stage_on "$m48" "$ROOT/tests/models/cost-two-matmuls.yaml" &&
				fixture cost.json written amp-capture --machine "$m48" "$COST" || return 1 ;;
		vit)
			fixture vit.yaml stage_on "$amp" "$ROOT/tests/models/vit-tiny.yaml" &&
				fixture vit.json written amp-capture "$VIT" || return 1 ;;
		*)
			echo "capture_fixtures: no fixture '$f'" >&2
			return 1 ;;
		esac
	done
}

# jq_empty FILTER FILE: the filter (which lists violations) gives [].
jq_empty() {
	run jq -c "$1" "$2"
	assert_success
	assert_output '[]'
}

# replay RECORD...: the cycles and transfers of NATIVE's phase for its copy
# step 4 with that step's transfers replaced by RECORDs.
replay() {
	sed '/^- {step: 4, kind: /d' "$NATIVE" > r.yaml
	printf '%s\n' "$@" >> r.yaml
	amp-capture r.yaml -o r.json || return 1
	jq -r '.phases[] | select(.steps == [4, 4]) | "\(.cycles) \(.transfers)"' r.json
}

# study STAGE SED OUT: STAGE with its machine header edited by SED, as a
# study of another machine (capture takes its rates from a machine file,
# never from a header): the edited header written as OUT.machine, a
# machine file of its own, and no machine file recorded in OUT's provenance
study() {
	sed -e "$2" -e '/^- {tool: amp-plan, /s/, {role: machine, [^}]*}//' "$1" >"$3"
	sed -n '3s/^machine: {/{amp-machine: 2, /p' "$3" >"$3.machine"
	! cmp -s "$1" "$3" && [ -s "$3.machine" ] || fail "study: nothing edited in $1"
}
