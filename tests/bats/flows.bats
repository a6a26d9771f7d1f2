#!/usr/bin/env bats
# The make flows (pipelines/*.mk): `make capture` writes every stage file
# under artifacts/NAME/ and remakes only what a change makes stale; the
# experiments print their side-by-side tables.
#
# The flows run on copies of tiny-mlp (tests/models/flow-*.yaml) with
# ARTIFACTS pointing into the test's own directory, so make check never
# writes the user's artifacts/. make runs with BIN pointing at a private
# copy of the binaries under test (mtimes kept), so touching a tool to
# make its stage stale does not make anyone else's artifacts stale.

load common
bats_require_minimum_version 1.5.0

TINY=tests/models/flow-tiny.yaml
BUDGET=tests/models/flow-budget.yaml

# The files of a capture, in flow order, and the tool each stage runs.
STAGE_FILES=(plan.yaml plan.txt composed.yaml expanded.yaml.zst
	exchange.yaml.zst grouped.yaml.zst)
OUTPUT_FILES=(emit.txt program.amp capture.json summary.txt)
TOOLS=(amp-plan amp-compose amp-expand amp-exchange amp-group amp-capture)

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	ARTS=$BATS_TEST_TMPDIR/art
	private_bin
}


# flow TARGET [VAR=VALUE...]: run make TARGET in the repo with the private BIN.
flow() {
	run make -C "$ROOT" --no-print-directory "$@" "${SAN_ARG[@]}" BIN="$BIN" ARTIFACTS="$ARTS"
}

# mtime FILE: modification time in nanoseconds (0 when FILE is missing).
mtime() {
	local t
	t=$(stat -c %.9Y "$1" 2>/dev/null) || t=$(date -r "$1" +%s.%N 2>/dev/null) || t=0.0
	t=${t/./}
	echo $((10#$t))
}

# snapshot DIR: remember the mtime of every capture file in DIR in BEFORE.
snapshot() {
	declare -gA BEFORE=()
	local f
	for f in "${STAGE_FILES[@]}" "${OUTPUT_FILES[@]}"; do
		BEFORE[$f]=$(mtime "$1/$f")
	done
}

# kept DIR FILE...: each FILE in DIR still has its snapshot mtime.
kept() {
	local dir=$1 f
	shift
	for f in "$@"; do
		assert [ -e "$dir/$f" ]
		assert_equal "$f $(mtime "$dir/$f")" "$f ${BEFORE[$f]}"
	done
}

# rewritten DIR FILE...: each FILE in DIR is newer than its snapshot.
rewritten() {
	local dir=$1 f now
	shift
	for f in "$@"; do
		assert [ -e "$dir/$f" ]
		now=$(mtime "$dir/$f")
		if [ "$now" -le "${BEFORE[$f]}" ]; then
			fail "$f was not rewritten (mtime ${BEFORE[$f]} before, $now after)"
		fi
	done
}

# ran TOOL...: make printed a command line running each TOOL.
ran() {
	local t
	for t in "$@"; do
		assert_line --regexp "^[^ ]*bin/$t "
	done
}

# not_ran TOOL...: make printed no command line running any TOOL.
not_ran() {
	local t
	for t in "$@"; do
		refute_line --regexp "^[^ ]*bin/$t "
	done
}

# touch_and_capture FILE: capture flow-tiny afresh, touch FILE (relative to
# the repo, or absolute) and capture again; $output is the second run's.
touch_and_capture() {
	flow capture MODEL=$TINY
	assert_success
	snapshot "$ARTS/flow-tiny"
	# Timestamps can be coarse (a few ms): make FILE clearly newer.
	sleep 0.05
	case $1 in
	/*) touch "$1" ;;
	*) touch "$ROOT/$1" ;;
	esac
	flow capture MODEL=$TINY
	assert_success
}

# table TITLE: the phase table (amp-compare's third) printed after the
# line TITLE in $output, one row per element of ROWS (header first, total
# last).
table() {
	local line in=0
	ROWS=()
	while IFS= read -r line; do
		if [ "$in" = 0 ]; then
			[ "$line" = "$1" ] && in=1
			continue
		fi
		if [ "$in" = 1 ]; then
			[[ $line == group\ * ]] || continue
			in=2
		fi
		ROWS+=("$line")
		[[ $line == total* ]] && break
	done <<<"$output"
	assert [ "${#ROWS[@]}" -ge 3 ]
}

# check_table A B: ROWS is a side-by-side table of variants A and B: the
# header names both variants' columns, every phase row has its group, its
# status and both variants' five cells (phase, labels and three figures,
# '-' on a side without the phase), and the total row sums the transfers
# and cycles of the phase rows and takes the largest max_row, for each
# variant.
check_table() {
	local a=$1 b=$2 row i n=${#ROWS[@]} num='([0-9]+|-)'
	assert_regex "${ROWS[0]}" "^group +status +$a +$a labels +transfers +max_row +cycles +$b +$b labels +transfers +max_row +cycles$"
	local -a f sum=(0 0 0 0 0 0)
	for ((i = 1; i < n - 1; i++)); do
		read -ra f <<<"${ROWS[i]//-/0}"
		assert_equal "${#f[@]} fields in: ${ROWS[i]}" "12 fields in: ${ROWS[i]}"
		assert_regex "${ROWS[i]}" "^[0-9]+ +(same|changed|regrouped|removed|added) +$num +[^ ]+ +$num +$num +$num +$num +[^ ]+ +$num +$num +$num$"
		sum[0]=$((sum[0] + f[4])); [ "${f[5]}" -gt "${sum[1]}" ] && sum[1]=${f[5]}; sum[2]=$((sum[2] + f[6]))
		sum[3]=$((sum[3] + f[9])); [ "${f[10]}" -gt "${sum[4]}" ] && sum[4]=${f[10]}; sum[5]=$((sum[5] + f[11]))
	done
	assert [ "$n" -ge 3 ]
	assert_regex "${ROWS[n - 1]}" '^total +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+$'
	read -ra f <<<"${ROWS[n - 1]}"
	assert_equal "total ${f[*]:1}" "total ${sum[*]}"
}

@test "make capture writes every stage file, the program, emit.txt, capture.json and summary.txt under ARTIFACTS/flow-tiny" {
	flow capture MODEL=$TINY
	assert_success
	local a=$ARTS/flow-tiny f
	for f in "${STAGE_FILES[@]}" "${OUTPUT_FILES[@]}"; do
		assert [ -s "$a/$f" ]
	done
	for f in expanded exchange grouped; do
		run zstd -tq "$a/$f.yaml.zst"
		assert_success
	done
	run jq -e '.phases | length > 0' "$a/capture.json"
	assert_success
	run head -n 1 "$a/tiles.tsv"
	assert_output '# amp-tiles 2: model tiny-mlp on amp1472 (1472 tiles)'
	run cat "$a/emit.txt"
	assert_line "program: $ARTS/flow-tiny/program.amp ($(wc -c <"$a/program.amp") bytes)"

	# summary.txt: the head, one op-table row per op, one phase-table row
	# per phase, the top classes and the emit report.
	local phases op
	phases=$(jq '.phases | length' "$a/capture.json")
	run cat "$a/summary.txt"
	assert_line --index 0 --regexp '^model tiny-mlp on amp1472 \([0-9]+ tiles\)$'
	assert_line --regexp "^phases run $phases, transfers [0-9,]+, bytes sent [0-9,]+ \(each send once, however many tiles receive it\)$"
	assert_line "$(jq -r '.summary | "modelled cycles: compute \(.compute_cycles), exchange \(.exchange_cycles), sync \(.sync_cycles), local copies \(.local_copy_cycles), total \(.total_cycles)"' "$a/capture.json")"
	assert_line --regexp '^op +compute +exchange +sync +local_copy +total$'
	for op in ln mlp_up act mlp_down residual; do
		assert_line --regexp "^$op +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+$"
	done
	# the bound and the floors beside the totals
	assert_line --regexp "^bound: [0-9,]+ cycles \(compute [0-9.]+[MK]?, matmul calls [0-9.]+[MK]?, sync [0-9.]+[MK]?, movement [0-9.]+[MK]?\); total is [0-9]+\.[0-9]{3}x the bound$"
	assert_line --regexp "^this plan's movement floor: [0-9,]+ cycles \(compute [0-9.]+[MK]?, its movement [0-9.]+[MK]?, sync [0-9.]+[MK]?\); total is [0-9]+\.[0-9]{3}x it$"
	assert_line --regexp "^exchange: [0-9,]+ cycles, [0-9]+\.[0-9]{3}x the per-phase floors \([0-9,]+ cycles\)$"
	assert_line 'phases (transfers, bytes, max_row, max_frag and cycles per run; total_cycles and floor over every run; ratio: cycles / floor)'
	assert_line --regexp '^phase +labels +runs +transfers +bytes +max_row +max_frag +cycles +total_cycles +floor +ratio$'
	for ((f = 0; f < phases; f++)); do
		assert_line --regexp "^$f +[^ ]+ +1 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+\.[0-9]{3}$"
	done
	# the total row adds up to the head's figures
	assert_line --regexp "$(jq -r '.summary | "^total +- +\(.phases) +\(.transfers) +\(.bytes) +\(.max_row_bytes) +[0-9]+ +- +\(.exchange_cycles) +\(.exchange_floor_cycles) +[0-9]+\\.[0-9]{3}$"' "$a/capture.json")"
	assert_line 'top movement classes by receiver payload'
	assert_line --regexp '^phase +op\.operand +tensor +movement +sends +receiver_bytes +replication$'
	assert_line --regexp '^[0-9]+ +[a-z_]+\.[a-z_]+ +[^ ]+ +(activation|parameter|output|reduction) +[0-9]+ +[0-9]+ +[0-9]+$'
	assert_line --regexp "^program: $(re_quote "$ARTS")/flow-tiny/program\\.amp \\([0-9]+ bytes\\)\$"

	# make capture prints the summary.
	flow capture MODEL=$TINY
	assert_success
	assert_output "$(cat "$a/summary.txt")"
}

@test "a second make capture with nothing changed runs no tool and rewrites no file" {
	flow capture MODEL=$TINY
	assert_success
	snapshot "$ARTS/flow-tiny"
	sleep 0.05
	flow capture MODEL=$TINY
	assert_success
	refute_output --partial 'bin/amp-'
	refute_output --partial 'mkdir'
	assert_line 'top movement classes by receiver payload'
	kept "$ARTS/flow-tiny" "${STAGE_FILES[@]}" "${OUTPUT_FILES[@]}"
}

@test "touching the model file reruns every stage of make capture" {
	touch_and_capture "$TINY"
	ran "${TOOLS[@]}"
	rewritten "$ARTS/flow-tiny" "${STAGE_FILES[@]}" "${OUTPUT_FILES[@]}"
}

@test "touching amp-expand reruns expand and every stage after it but not plan or compose" {
	touch_and_capture "$BIN/amp-expand"
	ran amp-expand amp-exchange amp-group amp-capture
	not_ran amp-plan amp-compose
	kept "$ARTS/flow-tiny" plan.yaml plan.txt composed.yaml
	rewritten "$ARTS/flow-tiny" expanded.yaml.zst exchange.yaml.zst \
		grouped.yaml.zst "${OUTPUT_FILES[@]}"
}

@test "touching amp-group reruns only group, emit, capture and the summary" {
	touch_and_capture "$BIN/amp-group"
	ran amp-group amp-capture
	not_ran amp-plan amp-compose amp-expand amp-exchange
	kept "$ARTS/flow-tiny" plan.yaml plan.txt composed.yaml \
		expanded.yaml.zst exchange.yaml.zst
	rewritten "$ARTS/flow-tiny" grouped.yaml.zst "${OUTPUT_FILES[@]}"
}

@test "touching amp-emit reruns only the emit step and the summary" {
	touch_and_capture "$BIN/amp-emit"
	not_ran "${TOOLS[@]}"
	kept "$ARTS/flow-tiny" "${STAGE_FILES[@]}" capture.json
	rewritten "$ARTS/flow-tiny" emit.txt program.amp summary.txt
}

@test "touching amp-capture reruns only the capture and the summary" {
	touch_and_capture "$BIN/amp-capture"
	ran amp-capture
	not_ran amp-plan amp-compose amp-expand amp-exchange amp-group
	kept "$ARTS/flow-tiny" "${STAGE_FILES[@]}" emit.txt program.amp
	rewritten "$ARTS/flow-tiny" capture.json summary.txt
}

@test "an interrupted make capture leaves no emit.txt.tmp behind" {
	flow capture MODEL=$TINY
	assert_success
	# an amp-emit that has started writing its report, then hangs
	printf '#!/bin/sh\necho "emitting" >&2\nexec sleep 30\n' >"$BIN/amp-emit"
	chmod +x "$BIN/amp-emit"
	# (a background job of a script starts with SIGINT ignored; env gives
	# make, and the hanging amp-emit, the default action back)
	setsid env --default-signal=INT make -C "$ROOT" --no-print-directory capture MODEL=$TINY "${SAN_ARG[@]}" BIN="$BIN" ARTIFACTS="$ARTS" \
		>make.out 2>&1 &
	local pid=$! i
	for i in $(seq 100); do
		[ -e "$ARTS/flow-tiny/emit.txt.tmp" ] && break
		sleep 0.1
	done
	assert [ -e "$ARTS/flow-tiny/emit.txt.tmp" ]
	kill -INT -- "-$pid"
	wait "$pid" || true
	run find "$ARTS/flow-tiny" -name '*.tmp'
	assert_output ""
}

@test "make capture over the table budget writes capture.json and summary.txt but no program, naming the tile and the budget" {
	flow capture MODEL=$BUDGET LIMITS='--table-budget 8'
	assert_success
	local a=$ARTS/flow-budget f
	for f in "${STAGE_FILES[@]}" emit.txt capture.json summary.txt; do
		assert [ -s "$a/$f" ]
	done
	assert [ ! -e "$a/program.amp" ]
	assert [ ! -e "$a/emit.txt.tmp" ]
	for f in emit.txt summary.txt; do
		run cat "$a/$f"
		assert_line --regexp '(^|: )tile [0-9]+: exchange tables need [0-9]+ bytes .*over the table budget of 8 bytes \(--table-budget\)$'
		assert_line 'program: not written (amp-emit refused it; its reason is above)'
		refute_line --regexp '^program: /'
	done
}

@test "an over-budget emit removes the program a previous capture wrote" {
	flow capture MODEL=$BUDGET
	assert_success
	assert [ -s "$ARTS/flow-budget/program.amp" ]
	sleep 0.05
	touch "$BIN/amp-emit"
	flow capture MODEL=$BUDGET LIMITS='--table-budget 8'
	assert_success
	assert [ ! -e "$ARTS/flow-budget/program.amp" ]
	run cat "$ARTS/flow-budget/summary.txt"
	assert_line 'program: not written (amp-emit refused it; its reason is above)'
}

@test "make experiment-weights prints direct and forward side by side with a total row" {
	siglip_ok
	flow experiment-weights
	assert_success
	table "parameter delivery on share/models/siglip-mlp.yaml: --weights direct vs forward"
	check_table direct forward
}

@test "make experiment-compose prints no-compose and compose side by side with a total row" {
	siglip_ok
	flow experiment-compose
	assert_success
	table "composition on share/models/siglip-mlp.yaml: --no-compose vs compose"
	check_table no-compose compose
}

@test "changing LIMITS remakes the program and the capture, and nothing before them" {
	flow capture MODEL=$BUDGET
	assert_success
	before=$(stat -c %.9Y "$ARTS/flow-budget/grouped.yaml.zst")
	sleep 0.05
	flow capture MODEL=$BUDGET LIMITS='--table-budget 8'
	assert_success
	refute_output --partial 'bin/amp-group'
	assert_output --regexp 'amp-capture --machine [^ ]+ --table-budget 8 '
	run stat -c %.9Y "$ARTS/flow-budget/grouped.yaml.zst"
	assert_output "$before"
	run grep -c 'against the budget 8: OVER' "$ARTS/flow-budget/summary.txt"
	assert_output 1
	run test -e "$ARTS/flow-budget/program.amp"
	assert_failure
}

@test "a mistyped MODEL fails before anything runs, even when results of that name exist" {
	flow capture MODEL=$TINY
	assert_success
	flow capture MODEL=typo/flow-tiny.yaml
	assert_failure
	assert_output --partial 'MODEL=typo/flow-tiny.yaml: no such file'
	not_ran amp-plan amp-capture
	refute_output --partial 'phases'
	flow experiment-weights EXP_MODEL=typo/siglip-mlp.yaml
	assert_failure
	assert_output --partial 'EXP_MODEL=typo/siglip-mlp.yaml: no such file'
}

@test "naming another machine file re-plans, even when it is older than the artifacts" {
	flow capture MODEL=$TINY
	assert_success
	# a copy of the default machine under another name, dated in the past
	sed 's/^name: .*/name: amp1472-copy/' "$ROOT/share/machines/amp1472.yaml" > old-machine.yaml
	touch -d '2001-01-01' old-machine.yaml
	grep -q '^name: amp1472-copy' old-machine.yaml || fail "the machine file has no name line"
	flow capture MODEL=$TINY MACHINE="$BATS_TEST_TMPDIR/old-machine.yaml"
	assert_success
	ran amp-plan
	run grep -c 'amp1472-copy' "$ARTS/flow-tiny/plan.yaml"
	assert_output 1
}

@test "a model edited but dated older than its results (cp -p, rsync, tar) is re-planned, and the summary names it" {
	mkdir m
	cp "$ROOT/$TINY" m/flow-tiny.yaml
	flow capture MODEL="$BATS_TEST_TMPDIR/m/flow-tiny.yaml"
	assert_success
	grep -q 'tiny-mlp' "$ARTS/flow-tiny/summary.txt" || fail "the summary does not name the model"
	run grep -c '^model-sha256 [0-9a-f]\{64\}$' "$ARTS/flow-tiny/inputs.flags"
	assert_output 1
	# the same bytes, touched: nothing to do
	touch -d '2001-01-01' m/flow-tiny.yaml
	flow capture MODEL="$BATS_TEST_TMPDIR/m/flow-tiny.yaml"
	assert_success
	not_ran amp-plan
	# another name, and a date older than every result
	sed -i 's/^name: tiny-mlp$/name: tiny-renamed/' m/flow-tiny.yaml
	touch -d '2001-01-01' m/flow-tiny.yaml
	flow capture MODEL="$BATS_TEST_TMPDIR/m/flow-tiny.yaml"
	assert_success
	ran amp-plan amp-compose amp-expand amp-exchange amp-group amp-capture
	grep -q 'tiny-renamed' "$ARTS/flow-tiny/summary.txt" || fail "the summary keeps the old name"
	! grep -q 'tiny-mlp' "$ARTS/flow-tiny/summary.txt" || fail "the summary keeps the old name"
	# the machine too: its content, not its date
	sed 's/^sync_cycles: .*/sync_cycles: 601/' "$ROOT/share/machines/amp1472.yaml" > machine.yaml
	flow capture MODEL="$BATS_TEST_TMPDIR/m/flow-tiny.yaml" MACHINE="$BATS_TEST_TMPDIR/machine.yaml"
	assert_success
	sed -i 's/^sync_cycles: .*/sync_cycles: 602/' machine.yaml
	touch -d '2001-01-01' machine.yaml
	flow capture MODEL="$BATS_TEST_TMPDIR/m/flow-tiny.yaml" MACHINE="$BATS_TEST_TMPDIR/machine.yaml"
	assert_success
	ran amp-plan
	grep -q 'sync_cycles: 602' "$ARTS/flow-tiny/plan.yaml" || fail "the plan keeps the old machine"
}

@test "a failed plan leaves nothing made from an earlier one: no stage file, capture, summary, program or validation run" {
	mkdir m
	cp "$ROOT/$TINY" m/flow-tiny.yaml
	flow validate MODEL="$BATS_TEST_TMPDIR/m/flow-tiny.yaml"
	assert_success
	flow capture MODEL="$BATS_TEST_TMPDIR/m/flow-tiny.yaml"
	assert_success
	local a=$ARTS/flow-tiny f
	[ -s "$a/program.amp" ] && [ -s "$a/run/program.amp" ] && [ -s "$a/run/run.txt" ] || fail "no earlier results"
	printf 'bogus: 1\n' >> m/flow-tiny.yaml
	flow capture MODEL="$BATS_TEST_TMPDIR/m/flow-tiny.yaml"
	assert_failure
	assert_output --partial "unknown key 'bogus'"
	for f in "${STAGE_FILES[@]}" "${OUTPUT_FILES[@]}" tiles.tsv run/grouped.yaml.zst run/program.amp run/run.txt; do
		[ ! -e "$a/$f" ] || fail "$f is left from the earlier plan"
	done
	# a parse error has no --explain output to keep
	[ ! -e "$a/plan.failed.txt" ] || fail "an empty plan.failed.txt"
}

@test "a model that does not fit keeps amp-plan's --explain output as plan.failed.txt and names it" {
	# the machine's SRAM cut until tiny-mlp's peak and tables are over it
	sed 's/^sram_bytes: .*/sram_bytes: 62000/' "$ROOT/share/machines/amp1472.yaml" > small.yaml
	flow capture MODEL=$TINY MACHINE="$BATS_TEST_TMPDIR/small.yaml"
	assert_failure
	assert_output --partial "does not fit machine"
	assert_line "make: amp-plan failed; its --explain output (the candidates it weighed) is in $ARTS/flow-tiny/plan.failed.txt"
	[ ! -e "$ARTS/flow-tiny/plan.txt" ] && [ ! -e "$ARTS/flow-tiny/plan.yaml" ] || fail "a plan is left"
	run head -n 1 "$ARTS/flow-tiny/plan.failed.txt"
	assert_output 'objective: cycles'
	# a plan that fits removes it
	flow capture MODEL=$TINY
	assert_success
	[ ! -e "$ARTS/flow-tiny/plan.failed.txt" ] || fail "plan.failed.txt outlives a plan that fits"
	[ -s "$ARTS/flow-tiny/plan.txt" ] || fail "no plan.txt"
}

@test "two models with one basename: the second is refused unless ART= keeps them apart" {
	flow capture MODEL=$TINY
	assert_success
	mkdir other
	cp "$ROOT/$TINY" other/flow-tiny.yaml
	flow capture MODEL="$BATS_TEST_TMPDIR/other/flow-tiny.yaml"
	assert_failure
	assert_output --partial "holds the results of $TINY, not $BATS_TEST_TMPDIR/other/flow-tiny.yaml"
	assert_output --partial 'set ART=DIR'
	not_ran amp-plan
	flow capture MODEL="$BATS_TEST_TMPDIR/other/flow-tiny.yaml" ART="$BATS_TEST_TMPDIR/other-art"
	assert_success
	assert [ -s "$BATS_TEST_TMPDIR/other-art/summary.txt" ]
}

@test "LIMITS with --sram-limit reaches amp-emit and not amp-capture" {
	flow capture MODEL=$TINY LIMITS='--sram-limit 600000 --table-budget 4096'
	assert_success
	assert_line --regexp '^[^ ]*bin/amp-capture --machine [^ ]+ --table-budget 4096 --tiles [^ ]+ -o '
	refute_line --regexp 'amp-capture .*--sram-limit'
	# amp-emit's report (its recipe is silent) names the SRAM limit it used
	assert_output --regexp 'largest SRAM use: tile [0-9]+, [0-9]+ bytes .* of 600000 available'
}

@test "make validate lowers with GROUP_FLAGS, and changing them re-lowers" {
	flow validate MODEL=$TINY GROUP_FLAGS='--weights direct'
	assert_success
	assert_line --regexp 'bin/amp-group --weights direct -z -o '
	assert_output --partial 'byte-exact'
	flow validate MODEL=$TINY GROUP_FLAGS='--weights forward'
	assert_success
	assert_line --regexp 'bin/amp-group --weights forward -z -o '
}

@test "experiment-weights on another EXP_MODEL writes its own directory and prints its own table" {
	flow experiment-weights EXP_MODEL=$TINY
	assert_success
	table "parameter delivery on $TINY: --weights direct vs forward"
	check_table direct forward
	flow experiment-weights EXP_MODEL=$BUDGET
	assert_success
	ran amp-plan
	table "parameter delivery on $BUDGET: --weights direct vs forward"
	check_table direct forward
	assert [ -s "$ARTS/experiments/flow-tiny/direct.capture.json" ]
	assert [ -s "$ARTS/experiments/flow-budget/direct.capture.json" ]
	run cat "$ARTS/experiments/flow-budget/inputs.flags"
	assert_line "model $BUDGET"
}

@test "make validate with PREFILL: a prefill model edited but dated older is re-planned and run again" {
	mkdir m
	cp "$ROOT/tests/models/tiny-lm-prefill.yaml" "$ROOT/tests/models/tiny-lm-decode.yaml" m/
	local args=(MODEL="$BATS_TEST_TMPDIR/m/tiny-lm-decode.yaml" PREFILL="$BATS_TEST_TMPDIR/m/tiny-lm-prefill.yaml")
	flow validate "${args[@]}"
	assert_success
	assert_line --regexp '^run 0 \(tiny-lm-prefill, position 0\)'
	flow validate "${args[@]}"
	assert_success
	not_ran amp-plan amp-run
	refute_output --partial 'is up to date'
	sed -i 's/^name: tiny-lm-prefill$/name: tiny-lm-prefill2/' m/tiny-lm-prefill.yaml
	touch -d '2001-01-01' m/tiny-lm-prefill.yaml
	flow validate "${args[@]}"
	assert_success
	assert_line --regexp '^run 0 \(tiny-lm-prefill2, position 0\)'
}

@test "MACHINE=NAME in the flows is share/machines/NAME.yaml; an unknown name fails listing the known ones" {
	flow plan MODEL=$TINY MACHINE=amp736
	assert_success
	assert_line --regexp '^[^ ]*bin/amp-plan --machine share/machines/amp736\.yaml '
	run head -n 3 "$ARTS/flow-tiny/plan.yaml"
	assert_line --index 2 --regexp '^machine: \{name: amp736, tiles: 736,'
	flow plan MODEL=$TINY MACHINE=amp73
	assert_failure
	assert_output --partial 'MACHINE=amp73: no such file, nor a machine name (known: amp1472 amp1472x2 amp1472x4 amp5888 amp736 m2000)'
	not_ran amp-plan
}
