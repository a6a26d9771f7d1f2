#!/usr/bin/env bash
# The search oracle: a brute force over pinned GEMM choices, every
# candidate lowered exactly by the real tools, so that the planner's search
# for the fastest fitting plan is measured, not assumed. docs/search.md
# describes it, its candidate subset and the figures measured.
#
#   bench/search-oracle.sh [mlp] [so400m]     (default: both cases)
#
#   mlp     share/models/siglip-mlp.yaml: coordinate descent, mlp_up, then
#           mlp_down (mlp_up at the best found), then mlp_up again
#   so400m  share/models/siglip-so400m-1layer.yaml: mlp_down, every other
#           GEMM and attention pinned at amp-plan's default choice
#
# A candidate is a copy of the model with the pins written in; it is
# lowered by amp-plan --no-fit-check | amp-compose | amp-expand |
# amp-exchange | amp-group, captured by amp-capture, and fits when amp-emit
# (the machine's own limits) succeeds. Only fitting candidates can be best.
#
# Environment: MACHINE (share/machines/amp1472.yaml), SEARCH_DIR (scratch,
# artifacts/experiments/search), SEARCH_GRIDS (grids per round by the
# per-tile estimate: 5 for mlp, 6 for so400m), SEARCH_JOBS (lowerings at
# once, 2: GNU parallel when installed, else xargs -P), BIN (bin).
# Results are kept per candidate under SEARCH_DIR/cand/, keyed by the
# pins, the model, the machine and the tools' bytes, so a rerun with the
# same tools lowers only what is new; SEARCH_FRESH=1 removes them first.
set -euo pipefail
export LC_ALL=C
self=$(readlink -f "$0")
cd "$(dirname "$self")/.."

# ---- worker: lower one candidate directory (internal) ----
if [ "${1:-}" = --lower ]; then
	d=$2 tools=$3 machine=$4 flags=${5-}
	cd "$d"
	rm -f result.tsv fail.txt
	fail() {        # fail STAGE: the first error line of that stage
		local msg
		msg=$(grep -m1 -v 'empty input' err.txt 2>/dev/null | tr '\t' ' ' |
			sed 's/^\(amp-[a-z]*\): [^ ]*:[0-9]*:[0-9]*: /\1: /' | cut -c1-200)
		printf '%s\t%s\n' "$1" "${msg:-exit status $?}" > fail.txt.tmp && mv fail.txt.tmp fail.txt
		rm -f plan.yaml g.yaml c.json
		exit 0
	}
	# shellcheck disable=SC2086
	"$tools/amp-plan" --machine "$machine" $flags -o plan.yaml model.yaml 2> err.txt || fail amp-plan
	( set -o pipefail; "$tools/amp-compose" plan.yaml | "$tools/amp-expand" | "$tools/amp-exchange" |
		"$tools/amp-group" > g.yaml ) 2> err.txt || fail lowering
	"$tools/amp-capture" --machine "$machine" -o c.json g.yaml 2> err.txt || fail amp-capture
	fits=yes
	"$tools/amp-emit" --no-model --machine "$machine" -o /dev/null g.yaml 2> emit.txt || fits=no
	# total, tables, fragments, SRAM, fits, the first line amp-emit said,
	# then each op's cycles (its rows of .ops summed) as op=cycles.
	jq -r --arg fits "$fits" --arg emit "$(sed -n '1{s/\t/ /g;p;}' emit.txt | cut -c1-200)" '
		[.summary.total_cycles, .summary.max_table_bytes, .summary.max_fragments,
		 .summary.max_sram_bytes, $fits, (if $fits == "yes" then "-" else $emit end),
		 ([.ops | group_by(.op)[] | "\(.[0].op)=\(map(.total_cycles) | add)"] | join(" "))] | @tsv' \
		c.json > result.tsv.tmp
	mv result.tsv.tmp result.tsv
	rm -f g.yaml err.txt
	exit 0
fi

machine=${MACHINE:-share/machines/amp1472.yaml}
dir=${SEARCH_DIR:-artifacts/experiments/search}
ngrids=${SEARCH_GRIDS:-}
jobs=${SEARCH_JOBS:-2}
bin=${BIN:-bin}
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(mlp so400m)
for c in "${cases[@]}"; do
	case $c in mlp|so400m) ;; *) echo "search-oracle: unknown case '$c' (mlp, so400m)" >&2; exit 2 ;; esac
done
[ -f "$machine" ] || { echo "search-oracle: MACHINE=$machine: no such file" >&2; exit 2; }
[ -n "${MAKELEVEL:-}" ] || [ "$bin" != bin ] || make -s all        # under make, or another BIN: built already
# SEARCH_FRESH=1: remove what earlier runs wrote here (only that)
[ "${SEARCH_FRESH:-}" != 1 ] || rm -rf "$dir/cand" "$dir/planner" "$dir/tools" "$dir/mlp" "$dir/so400m" "$dir/summary.txt"
mkdir -p "$dir/cand" "$dir/tools"

# The tools are copied once, so a rebuild of bin/ during the search cannot
# mix two versions; their bytes are part of every result's key.
for t in amp-plan amp-compose amp-expand amp-exchange amp-group amp-capture amp-emit; do
	cp "$bin/$t" "$dir/tools/$t.tmp" && mv "$dir/tools/$t.tmp" "$dir/tools/$t"
done
tools=$(readlink -f "$dir/tools")
machine_abs=$(readlink -f "$machine")
toolsum=$(cat "$tools"/amp-* "$machine" | md5sum | cut -c1-32)
if command -v parallel > /dev/null; then runner="GNU parallel -j$jobs"; else runner="xargs -P$jobs"; fi

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }

# ---- reading a plan ----
# gemm_choices PLAN: "op R K C cast staging out_staging reduce" per GEMM.
gemm_choices() {
	awk '/^gemms:/ { s = 1; next } /^[a-z]/ { s = 0 }
	s && /^- \{op: / {
		l = $0; op = l; sub(/^- \{op: /, "", op); sub(/,.*/, "", op)
		g = l; sub(/.* grid: \[/, "", g); sub(/\].*/, "", g); gsub(/,/, "", g)
		printf "%s %s", op, g
		n = split("cast staging out_staging reduce", ks, " ")
		for (i = 1; i <= n; i++) {
			v = "-"
			if (match(l, "[ ,{]" ks[i] ": [a-z-]+")) { v = substr(l, RSTART + 1, RLENGTH - 1); sub(/^[a-z_]+: /, "", v) }
			printf " %s", v
		}
		printf "\n"
	}' "$1"
}

# can_spread PLAN OP K C: does grid k K, cols C allow staging spread for
# OP's GEMM (each K block's strips cut into C whole-strip pieces, none
# empty; formats/plan.md)?
can_spread() {
	awk -v op="$2" -v K="$3" -v C="$4" '/^gemms:/ { s = 1; next } /^[a-z]/ { s = 0 }
	s && index($0, "- {op: " op ", ") == 1 {
		k = $0; sub(/.* k: /, "", k); sub(/,.*/, "", k)
		mu = $0 ~ /format: fp8/ ? 32 : 16
		strips = int((k + mu - 1) / mu); sk = int((strips + K - 1) / K)
		if (C > 1 && sk % C == 0) { w = sk / C * mu; ok = int((k + w - 1) / w) == K * C }
	} END { exit !ok }' "$1"
}

# attention_pins PLAN: a pin line per attention op, "op: {blocks: [Q, K],
# kv_staging: S}": Q and K from the split of its q and k placements
# (formats/plan.md), relay when the keys have a stage; "op: {kv_staging:
# home}" when the keys are a state's home.
attention_pins() {
	awk '/^placements:/ { s = 1 } /^steps:/ { s = 0 }
	s && /^- \{name: / {
		n = $0; sub(/^- \{name: /, "", n); sub(/,.*/, "", n)
		sp = $0; sub(/.* split: \[/, "", sp); sub(/\].*/, "", sp); split(sp, a, ", ")
		part[n] = a[2]; have[n] = 1
	}
	/compute: attention/ {
		op = $0; sub(/.* op: /, "", op); sub(/,.*/, "", op)
		l = $0; sub(/.* in: \[/, "", l); sub(/\].*/, "", l); split(l, in_, ", ")
		ops[++no] = op; q[op] = in_[1]; k[op] = in_[2]
	}
	END {
		for (i = 1; i <= no; i++) {
			op = ops[i]
			if (k[op] ~ /@home$/)   # on the home of a state: its blocks are the home ones
				printf "  %s: {kv_staging: home}\n", op
			else
				printf "  %s: {blocks: [%s, %s], kv_staging: %s}\n", op, part[q[op]], part[k[op]],
					have[k[op] ".stage"] ? "relay" : "direct"
		}
	}' "$1"
}

# gemm_shape PLAN OP: "batch tokens k n format" of OP's matmul.
gemm_shape() {
	awk -v op="$2" '
	/^tensors:/ { t = 1 } /^host:|^gemms:/ { t = 0 }
	t && /^- \{name: / { n = $0; sub(/^- \{name: /, "", n); sub(/,.*/, "", n)
		sh = $0; sub(/.* shape: \[/, "", sh); sub(/\].*/, "", sh); shape[n] = sh }
	/^gemms:/ { g = 1; next } /^[a-z]/ { g = 0 }
	g && index($0, "- {op: " op ",") == 1 {
		a = $0; sub(/.* a: /, "", a); sub(/,.*/, "", a)
		k = $0; sub(/.* k: /, "", k); sub(/,.*/, "", k)
		nn = $0; sub(/.* n: /, "", nn); sub(/,.*/, "", nn)
		f = $0; sub(/.* format: /, "", f); sub(/,.*/, "", f)
		found = 1
	}
	END { if (!found) exit 1; split(shape[a], s, ", "); print s[1], s[2], k, nn, f }' "$1"
}

# machine_key PLAN KEY: a figure of the plan's machine line.
machine_key() { sed -n "/^machine: /{s/^machine: .*[{ ]$2: \([0-9]*\).*/\1/p;q;}" "$1"; }

# ---- the candidate grids ----
# grids PLAN OP SEEDS: the searched grids of OP, "R K C estimate" each,
# lowest estimate first. Of the grids amp-plan accepts (every axis cut
# uniformly, R·K·C ≤ tiles) that use at least half the tiles, case_grids
# of them: the lowest-estimate grid of each K, the K in the order of those
# estimates, then the second of each K, and so on; then the SEEDS ("R K
# C,...": the planners' own grids), whatever their tiles, marked "seed".
# Writes "valid half" (the two counts) to $dir/counts.tmp.
grids() {
	local plan=$1 op=$2 seeds=$3 shape
	shape=$(gemm_shape "$plan" "$op") || { echo "search-oracle: no GEMM '$op' in $plan" >&2; exit 1; }
	awk -v shape="$shape" -v seeds="$seeds" -v counts="$dir/counts.tmp" \
		-v tiles="$(machine_key "$plan" tiles)" -v call="$(machine_key "$plan" matmul_call_cycles)" \
		-v bpc="$(machine_key "$plan" exchange_bytes_per_cycle)" -v sync="$(machine_key "$plan" sync_cycles)" \
		-v m8="$(machine_key "$plan" fp8)" -v m16="$(machine_key "$plan" fp16)" \
		-v rcpe="$(machine_key "$plan" reduction_cycles_per_element)" '
	function cdiv(a, b) { return int((a + b - 1) / b) }
	function uok(n, p) { return p >= 1 && p <= n && cdiv(n, cdiv(n, p)) == p }
	function min(a, b) { return a < b ? a : b }
	# The estimate, on the tile with the largest shards, by the cost model
	# of the machine file: its matmul step; with K > 1 the sum of the
	# partials (scattered: its K-th of the rows of K partials,
	# reduction_cycles_per_element each); receiving its a and b shards and
	# the partials it sums (fp16, (K-1)/K of its block) and sending its
	# K-th of the result, at exchange_bytes_per_cycle; a barrier per phase
	# (a and b, the result, and the reduction when K > 1).
	function est(R, K, C,   rows, kc, cols, mm, ab, red, out) {
		rows = B * cdiv(T, R); kc = min(cdiv(S, K) * mu, k); cols = min(cdiv(G, C) * 16, n)
		mm = cdiv(rows * kc * cols, macs) + call
		if (K > 1) mm += rcpe * rows * cols
		ab = rows * kc * eb + kc * cols * eb
		red = K > 1 ? (K - 1) * rows * cols * 2 / K : 0
		out = rows * cols * 2 / K
		return mm + cdiv(ab, bpc) + cdiv(red, bpc) + cdiv(out, bpc) + sync * (2 + (K > 1))
	}
	BEGIN {
		split(shape, s, " "); B = s[1]; T = s[2]; k = s[3]; n = s[4]
		mu = s[5] == "fp8" ? 32 : 16; eb = s[5] == "fp8" ? 1 : 2; macs = s[5] == "fp8" ? m8 : m16
		S = cdiv(k, mu); G = cdiv(n, 16)
		for (R = 1; R <= T && R <= tiles; R++) {
			if (!uok(T, R)) continue
			for (K = 1; K <= S && R * K <= tiles; K++) {
				if (!uok(S, K)) continue
				for (C = 1; C <= G && R * K * C <= tiles; C++) {
					if (!uok(G, C)) continue
					valid++
					if (2 * R * K * C < tiles) continue
					half++
					print est(R, K, C), R, K, C, 0
				}
			}
		}
		ns = split(seeds, a, ",")
		for (i = 1; i <= ns; i++) { split(a[i], g, " "); print est(g[1], g[2], g[3]), g[1], g[2], g[3], 1 }
		print valid + 0, half + 0 > counts
	}' | sort -k1,1n -k2,2n -k3,3n -k4,4n -k5,5n |
	awk '$5 == 1 { print 0, $0; next } { print ++per[$3], $0 }' |     # each grid's rank among its K
	sort -k1,1n -k2,2n -k3,3n -k4,4n -k5,5n | awk -v top="$case_grids" '
	{ g = $3 " " $4 " " $5 }
	$6 == 0 && n < top && !(g in have) { have[g] = 1; n++; print g, $2; next }
	$6 == 1 { seed[g] = $2 }
	END { for (g in seed) if (!(g in have)) print g, seed[g], "seed" }' | sort -k4,4n -k1,1n -k2,2n -k3,3n
}

# ---- candidates ----
desc() { # desc "R K C cast staging out reduce": [R,K,C] staging/out/reduce (cast when not early)
	# shellcheck disable=SC2086   # the fields, split on purpose
	set -- $1
	local red=$7
	[ "$2" -gt 1 ] || red=-
	printf '[%s,%s,%s] %s/%s/%s%s' "$1" "$2" "$3" "$5" "$6" "$red" "$([ "$4" = early ] || echo " cast $4")"
}
pin_line() { # pin_line OP "R K C cast staging out reduce"
	# shellcheck disable=SC2086
	set -- "$1" $2
	printf '  %s: {grid: [%s, %s, %s], cast: %s, staging: %s, out_staging: %s, reduce: %s}\n' "$@"
}

declare -A cur                  # op -> its current choice
gemm_ops=()                     # every GEMM op, in plan order
# make_candidate: a candidate of the current choices (cur) with the
# attention pins; its key on stdout, its directory made when new.
make_candidate() {
	local pins="pins:"$'\n' op key d
	for op in "${gemm_ops[@]}"; do pins+=$(pin_line "$op" "${cur[$op]}")$'\n'; done
	pins+=$att
	key=$(printf '%s\n%s\n%s\n' "$toolsum" "$model_sum" "$pins" | md5sum | cut -c1-16)
	d=$dir/cand/$key
	if [ ! -f "$d/model.yaml" ]; then
		mkdir -p "$d"
		# amp-model 3 (staging spread), a superset of 1 and 2
		{ sed 's/^amp-model: [12]$/amp-model: 3/' "$model"; printf '%s\n' "$pins"; } > "$d/model.yaml.tmp"
		mv "$d/model.yaml.tmp" "$d/model.yaml"
	fi
	printf '%s\n' "$key"
}

# lower_all KEY...: every candidate without a result, SEARCH_JOBS at once.
lower_all() {
	local k todo=()
	for k in "$@"; do
		[ -f "$dir/cand/$k/result.tsv" ] || [ -f "$dir/cand/$k/fail.txt" ] || todo+=("$dir/cand/$k")
	done
	cached=$(( $# - ${#todo[@]} ))
	[ ${#todo[@]} -gt 0 ] || return 0
	if command -v parallel > /dev/null; then
		printf '%s\n' "${todo[@]}" | parallel --will-cite -j "$jobs" "$self" --lower {} "$tools" "$machine_abs" --no-fit-check
	else
		printf '%s\0' "${todo[@]}" | xargs -0 -P "$jobs" -I{} "$self" --lower {} "$tools" "$machine_abs" --no-fit-check
	fi
}

# fail_msg DIR: why the tools refused a candidate: the stage's first error.
fail_msg() {
	[ -f "$1/fail.txt" ] || { echo 'not lowered'; return; }
	awk -F'\t' '{ print (index($2, "amp-") == 1 ? $2 : $1 ": " $2) }' "$1/fail.txt"
}

# result KEY: "total tables frags sram fits reason opcycles", or
# "- - - - no STAGE: message" for a candidate the tools refused.
result() {
	local d=$dir/cand/$1
	if [ -f "$d/result.tsv" ]; then cat "$d/result.tsv"
	else printf -- '-\t-\t-\t-\tno\t%s\t\n' "$(fail_msg "$d")"; fi
}

op_cycles() { # op_cycles "op=n op=n ..." OP
	local x
	for x in $1; do [ "${x%%=*}" != "$2" ] || { echo "${x#*=}"; return; }; done
	echo -
}

# plan_of FLAGS: the planner's plan of the unpinned model with FLAGS (no
# --no-fit-check: amp-plan's own fit check), lowered and captured as a
# candidate is; sets pl_dir, pl_res and pl_ok (no when amp-plan refused).
plan_of() {
	local key
	key=$(printf '%s\n%s\nplanner %s\n' "$toolsum" "$model_sum" "$1" | md5sum | cut -c1-16)
	pl_dir=$dir/planner/$key
	mkdir -p "$pl_dir"
	[ -f "$pl_dir/model.yaml" ] || { cp "$model" "$pl_dir/model.yaml.tmp" && mv "$pl_dir/model.yaml.tmp" "$pl_dir/model.yaml"; }
	[ -f "$pl_dir/result.tsv" ] || [ -f "$pl_dir/fail.txt" ] || "$self" --lower "$pl_dir" "$tools" "$machine_abs" "$1"
	if [ -f "$pl_dir/result.tsv" ]; then pl_ok=yes; pl_res=$(cat "$pl_dir/result.tsv")
	else pl_ok=no; pl_res=$(printf -- '-\t-\t-\t-\tno\t%s\t' "$(fail_msg "$pl_dir")"); fi
}

# ---- one case ----
run_case() {
	local name=$1 rounds=$2 t0 t1 op key
	model=$3 case_grids=${ngrids:-$4}
	case_dir=$dir/$name
	mkdir -p "$case_dir"
	grep -q '^pins:' "$model" && { echo "search-oracle: $model already has pins" >&2; exit 1; }
	model_sum=$(md5sum < "$model" | cut -c1-32)
	t0=$(now)
	echo "== case $name: $model (machine $(basename "$machine"), $runner)"

	plan_of ""; local def_plan=$pl_dir/plan.yaml def_res=$pl_res def_ok=$pl_ok
	plan_of "--objective memory"; local alt_plan=$pl_dir/plan.yaml alt_res=$pl_res alt_ok=$pl_ok
	[ "$def_ok" = yes ] || { echo "search-oracle: amp-plan has no plan of $model: $(cut -f6 <<< "$def_res")" >&2; exit 1; }
	declare -A def_choice alt_choice
	gemm_ops=()
	while read -r op rest; do gemm_ops+=("$op"); def_choice[$op]=$rest; cur[$op]=$rest; done < <(gemm_choices "$def_plan")
	if [ "$alt_ok" = yes ]; then
		while read -r op rest; do alt_choice[$op]=$rest; done < <(gemm_choices "$alt_plan")
	fi
	att=$(attention_pins "$def_plan")

	# The planner's own choices pinned: the same figures as its plan?
	local repro
	repro=$(make_candidate)
	lower_all "$repro"
	local rtot dtot
	rtot=$(result "$repro" | cut -f1); dtot=$(cut -f1 <<< "$def_res")
	echo "the default plan's choices written as pins: $rtot cycles, the plan itself $dtot ($([ "$rtot" = "$dtot" ] && echo same || echo DIFFERENT))"

	local all_keys=() searched=() r=0 rop bestkey
	declare -A first_round
	first_round[$repro]=plan
	for rop in $rounds; do
		r=$((r + 1))
		local seeds
		seeds=$(echo "${def_choice[$rop]}" | cut -d' ' -f1-3)
		[ -z "${alt_choice[$rop]:-}" ] || seeds+=",$(echo "${alt_choice[$rop]}" | cut -d' ' -f1-3)"
		grids "$def_plan" "$rop" "$seeds" > "$case_dir/round$r.grids"
		read -r nvalid nhalf < "$dir/counts.tmp"
		local keys=() R K C st out red keep=${cur[$rop]}
		while read -r R K C _; do
			for st in pack-once direct spread; do for out in direct unpack; do for red in gather scatter; do
				[ "$K" -gt 1 ] || [ $red = gather ] || continue
				[ $st != spread ] || can_spread "$def_plan" "$rop" "$K" "$C" || continue
				cur[$rop]="$R $K $C early $st $out $red"
				key=$(make_candidate)
				keys+=("$key")
				[ -n "${first_round[$key]:-}" ] || first_round[$key]=$r
				printf '%s\t%s\n' "$key" "$(desc "${cur[$rop]}")" >> "$case_dir/round$r.keys.tmp"
			done; done; done
		done < "$case_dir/round$r.grids"
		mv "$case_dir/round$r.keys.tmp" "$case_dir/round$r.keys"
		cur[$rop]=$keep
		local fixed="" o
		for o in $rounds; do [ "$o" = "$rop" ] || [[ "$fixed" == *" $o "* ]] || fixed+=" $o $(desc "${cur[$o]}");"; done
		t1=$(now)
		echo "round $r: $rop: ${#keys[@]} candidates on $(wc -l < "$case_dir/round$r.grids") grids" \
			"(of $nvalid valid grids, $nhalf using at least half the tiles: $case_grids by the estimate," \
			"best of each K first, and the planners' own); fixed:$fixed every other op at the default plan's choice"
		echo "  grids (estimate): $(awk '{ printf "%s[%s,%s,%s] %s%s", (NR > 1 ? ", " : ""), $1, $2, $3, $4, ($5 == "seed" ? " (seed)" : "") }' "$case_dir/round$r.grids")"
		lower_all "${keys[@]}"
		echo "  lowered ${#keys[@]} ($cached already known) in $(secs "$t1" "$(now)") s"
		# the best fitting of the round becomes the op's choice
		bestkey=$(for key in "${keys[@]}"; do printf '%s\t%s\n' "$key" "$(result "$key" | cut -f1-5)"; done |
			awk -F'\t' '$6 == "yes"' | sort -t$'\t' -k2,2n -k3,3n -k5,5n -k1,1 | awk -F'\t' 'NR == 1 { print $1 }')
		if [ -n "$bestkey" ]; then
			cur[$rop]=$(sed -n "s/^  $rop: {grid: \[\([0-9]*\), \([0-9]*\), \([0-9]*\)\], cast: \([a-z]*\), staging: \([a-z-]*\), out_staging: \([a-z]*\), reduce: \([a-z]*\)}$/\1 \2 \3 \4 \5 \6 \7/p" "$dir/cand/$bestkey/model.yaml")
			echo "  best of the round: $rop $(desc "${cur[$rop]}"), $(result "$bestkey" | cut -f1) cycles"
		else
			echo "  no candidate of the round fits; $rop stays $(desc "${cur[$rop]}")"
		fi
		all_keys+=("${keys[@]}")
		[[ " ${searched[*]} " == *" $rop "* ]] || searched+=("$rop")
	done

	# ---- the table: every candidate of the case once, fastest first ----
	local tab=$case_dir/candidates.tsv
	: > "$tab.tmp"
	for key in $(printf '%s\n' "${all_keys[@]}" | sort -u); do
		local res pins="" ocs="" o
		res=$(result "$key")
		for o in "${searched[@]}"; do
			pins+="${pins:+; }$o $(desc "$(sed -n "s/^  $o: {grid: \[\([0-9]*\), \([0-9]*\), \([0-9]*\)\], cast: \([a-z]*\), staging: \([a-z-]*\), out_staging: \([a-z]*\), reduce: \([a-z]*\)}$/\1 \2 \3 \4 \5 \6 \7/p" "$dir/cand/$key/model.yaml")")"
			ocs+="$(op_cycles "$(cut -f7 <<< "$res")" "$o")"$'\t'
		done
		printf '%s\t%s\t%s%s\n' "${first_round[$key]}" "$pins" "$ocs" "$(cut -f1-6 <<< "$res")" >> "$tab.tmp"
	done
	local no=${#searched[@]}
	# sort: lowered first by total cycles, refused last
	awk -F'\t' -v no="$no" '{ t = $(3 + no); r = t == "-"
		print r "\t" (r ? 0 : t) "\t" (r ? 0 : $(4 + no)) "\t" (r ? 0 : $(6 + no)) "\t" $0 }' "$tab.tmp" |
		sort -t$'\t' -k1,1n -k2,2n -k3,3n -k4,4n -k6,6 | cut -f5- > "$tab"
	rm -f "$tab.tmp"
	local hdr="round	pins" o
	for o in "${searched[@]}"; do hdr+="	$o cycles"; done
	hdr+="	total cycles	tables	fragments	SRAM	fits	why not"
	local nall nfit nref
	nall=$(wc -l < "$tab")
	nfit=$(awk -F'\t' -v c=$((no + 7)) '$c == "yes"' "$tab" | wc -l)
	nref=$(awk -F'\t' -v c=$((no + 3)) '$c == "-"' "$tab" | wc -l)
	echo
	echo "every candidate of case $name ($nall), fastest first:"
	{ echo "$hdr"; cat "$tab"; } | column -t -s$'\t'
	echo
	echo "top 10 fitting:"
	{ echo "$hdr" | cut -f1-$((no + 7)); awk -F'\t' -v c=$((no + 7)) '$c == "yes" && n++ < 10' "$tab" | cut -f1-$((no + 7)); } | column -t -s$'\t'
	echo
	local pbest bestline k bops="" bo=()
	bestline=$(awk -F'\t' -v c=$((no + 7)) '$c == "yes" && !n++' "$tab")
	pbest=$(cut -f$((no + 3)) <<< "$bestline")
	k=3
	for o in "${searched[@]}"; do
		bo+=("$(cut -f$k <<< "$bestline")"); bops+="${bops:+, }$o ${bo[-1]}"; k=$((k + 1))
	done
	rat() { [ -n "$2" ] && [ "$1" != - ] && [ "$2" != - ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f×", a / b }' || echo "-"; }
	# planner_line LABEL RESULT CHOICES(array name) NOTE
	planner_line() {
		local -n ch=$3
		local pins="" ops="" i=0 oc
		for o in "${searched[@]}"; do
			pins+="${pins:+; }$o $(desc "${ch[$o]}")"
			oc=$(op_cycles "$(cut -f7 <<< "$2")" "$o")
			ops+="$o $oc, $(rat "$oc" "${bo[$i]:-}"); "; i=$((i + 1))
		done
		echo "$1: $pins $(cut -f1 <<< "$2") cycles, $(rat "$(cut -f1 <<< "$2")" "$pbest") the best found" \
			"(${ops}fits: $(cut -f5 <<< "$2")$4)"
	}
	local others=""
	[ ${#gemm_ops[@]} -eq ${#searched[@]} ] || others="; every other op its own choice"
	local summ=$case_dir/summary.txt
	{
		echo "case $name: $model; lowered $nall candidates, $nfit fit ($nref refused by the tools)," \
			"$(secs "$t0" "$(now)") s wall"
		if [ -n "$bestline" ]; then
			echo "best found: $(cut -f2 <<< "$bestline") $pbest cycles ($bops)"
		else
			echo "best found: none of the candidates fits"
		fi
		planner_line "planner (amp-plan default objective)" "$def_res" def_choice ""
		if [ "$alt_ok" = yes ]; then
			planner_line "planner (amp-plan --objective memory)" "$alt_res" alt_choice "$others"
		else
			echo "planner (amp-plan --objective memory): no plan ($(cut -f6 <<< "$alt_res"))"
		fi
	} > "$summ"
	cat "$summ"
	echo
}

T0=$(now)
: > "$dir/summary.txt"
for c in "${cases[@]}"; do
	case $c in
	mlp) run_case mlp "mlp_up mlp_down mlp_up" share/models/siglip-mlp.yaml 5 ;;
	so400m) run_case so400m "mlp_down" share/models/siglip-so400m-1layer.yaml 6 ;;
	esac
	cat "$dir/$c/summary.txt" >> "$dir/summary.txt"
done
rm -f "$dir/counts.tmp" "$dir/grids.tmp"
echo "== summary ($(secs "$T0" "$(now)") s wall; tools md5 ${toolsum:0:12}; commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(
	[ -z "$(git status --porcelain 2>/dev/null)" ] || echo ', work tree with uncommitted changes'))"
cat "$dir/summary.txt"
