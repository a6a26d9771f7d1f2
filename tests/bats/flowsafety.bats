#!/usr/bin/env bats
# The make flows never claim success over a partial result: one make at a
# time writes an artifacts directory (the second waits for the first's
# lock, then finds everything up to date); a killed run's temporaries are
# removed by the next; a stage that fails leaves nothing made from its
# earlier run looking current; a full disk fails the flow, naming the
# write that failed.

load common
bats_require_minimum_version 1.5.0

TINY=tests/models/flow-tiny.yaml

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	ART=$BATS_TEST_TMPDIR/art
	private_bin
}

teardown() {
	mountpoint -q "$BATS_TEST_TMPDIR/small" 2>/dev/null && umount "$BATS_TEST_TMPDIR/small"
	return 0
}

# flow TARGET [VAR=VALUE...]: make TARGET in the repo with the private BIN, into ART
flow() {
	run --separate-stderr make -C "$ROOT" --no-print-directory "$@" "${SAN_ARG[@]}" BIN="$BIN" ART="$ART"
}

@test "a second make on the same artifacts waits for the first's lock, then finds its results current" {
	flow capture MODEL=$TINY
	assert_success
	cp "$ART/summary.txt" before.txt
	# another make holds the lock for 2 seconds
	flock "$ART/.lock" sleep 2 &
	sleep 0.3
	flow capture MODEL=$TINY LIMITS='--table-budget 4096'
	assert_success
	wait
	[[ $stderr == *"make: another make is writing $ART; waiting for it"* ]] || fail "no word of the wait: $stderr"
	grep -q 'against the budget 4096' "$ART/summary.txt" || fail "the second make's summary is not whole"
	# two at once: both succeed, and the summary is the last one's, whole
	make -C "$ROOT" -s "${SAN_ARG[@]}" BIN="$BIN" ART="$ART" capture MODEL=$TINY >one.out 2>&1 &
	local one=$!
	flow capture MODEL=$TINY
	assert_success
	wait "$one" || fail "the other make failed: $(cat one.out)"
	cmp -s before.txt "$ART/summary.txt" || fail "summary.txt is not the default limits' one"
}

@test "a killed run's temporaries are removed by the next run" {
	flow capture MODEL=$TINY
	assert_success
	touch "$ART/capture.json.tmp.12345" "$ART/tiles.tsv.tmp.999" "$ART/summary.txt.tmp" "$ART/emit.txt.tmp"
	mkdir "$ART/report.tmp"
	flow capture MODEL=$TINY
	assert_success
	run ls -A "$ART"
	refute_output --partial ".tmp"
}

@test "a stage that fails removes what was made from its earlier run" {
	cp "$ROOT/$TINY" m.yaml
	flow capture MODEL="$BATS_TEST_TMPDIR/m.yaml"
	assert_success
	local f
	for f in plan.yaml composed.yaml grouped.yaml.zst emit.txt program.amp capture.json summary.txt; do
		[ -s "$ART/$f" ] || fail "no $f"
	done
	# a pin amp-plan refuses: nothing downstream of the plan may stay
	sed -i 's/^  mlp_down: {grid: \[[0-9, ]*\]/  mlp_down: {grid: [1000, 1, 1]/' m.yaml
	grep -q 'grid: \[1000, 1, 1\]' m.yaml || fail "no pin to break"
	flow capture MODEL="$BATS_TEST_TMPDIR/m.yaml"
	assert_failure
	for f in plan.yaml plan.txt composed.yaml expanded.yaml.zst exchange.yaml.zst grouped.yaml.zst emit.txt program.amp \
		capture.json tiles.tsv summary.txt; do
		[ ! -e "$ART/$f" ] || fail "$f from the earlier run is still there"
	done
}

@test "make validate: a step that fails removes the run's earlier program and report" {
	flow validate MODEL=$TINY
	assert_success
	[ -s "$ART/run/program.amp" ] && [ -s "$ART/run/run.txt" ] || fail "no program or report"
	# the run fails (a newer program, and an amp-run as old as the real one
	# that fails every run): the earlier report must not stay
	mv "$BIN/amp-run" "$BIN/amp-run.real"
	printf '#!/bin/sh\necho "amp-run: broken" >&2\nexit 1\n' >"$BIN/amp-run"
	chmod +x "$BIN/amp-run"
	touch -r "$BIN/amp-run.real" "$BIN/amp-run"
	touch "$ART/run/program.amp"
	flow validate MODEL=$TINY
	assert_failure
	[[ $stderr == *"amp-run: broken"* ]] || fail "$stderr"
	[ -s "$ART/run/program.amp" ] || fail "the program went too"
	[ ! -e "$ART/run/run.txt" ] || fail "run.txt from the earlier run is still there"
	mv "$BIN/amp-run.real" "$BIN/amp-run"
	flow validate MODEL=$TINY
	assert_success
	[ -s "$ART/run/run.txt" ] || fail "no report again"
	# the plan fails (a flag amp-plan refuses): neither the lowered stage,
	# the program nor the report may stay; the calibration does
	flow validate MODEL=$TINY PLAN_FLAGS='--objective nosuch'
	assert_failure
	local f
	for f in grouped.yaml.zst program.amp run.txt; do
		[ ! -e "$ART/run/$f" ] || fail "run/$f from the earlier run is still there"
	done
	[ -s "$ART/run/scales.yaml" ] || fail "the calibration went too"
}

@test "a full disk fails the flow, naming the write that failed, and a rerun with room finishes it" {
	[ "$(id -u)" = 0 ] || skip "mounting a small file system needs root"
	mkdir small
	mount -t tmpfs -o size=80k tmpfs small 2>/dev/null || skip "cannot mount a tmpfs here"
	ART=$BATS_TEST_TMPDIR/small/art
	flow capture MODEL=tests/models/flow-budget.yaml
	assert_failure
	[[ $stderr == *"No space left on device"* ]] || fail "the cause is not named: $stderr"
	[ ! -s "$ART/summary.txt" ] || fail "a summary over a partial result"
	# no empty file passes for a result on the next run
	umount small
	mkdir -p small/art
	flow capture MODEL=tests/models/flow-budget.yaml
	assert_success
	[ -s "$ART/summary.txt" ] && [ -s "$ART/plan.txt" ] || fail "the rerun did not finish"
}

@test "a path make cannot quote is refused before anything runs, and nothing is deleted" {
	mkdir -p d/experiments d/figures
	touch d/experiments/keep d/figures/keep m.yaml
	local v bad
	# the issue's cases (rm -rf of d/experiments, m$x.yaml read as m.yaml),
	# then every forbidden character in each path variable
	local d=$BATS_TEST_TMPDIR/d
	for v in "ART=$d/experiments 2" "CMP_OUT=$d/figures v2" "MODEL=$BATS_TEST_TMPDIR/m\$x.yaml"; do
		run --separate-stderr make -C "$ROOT" --no-print-directory "${SAN_ARG[@]}" BIN="$BIN" \
			capture "$v"
		assert_failure
		[[ $stderr == *"${v%%=*}: a path with a space, tab, newline, glob character"* ]] ||
			fail "$v: not refused as unquotable: $stderr"
	done
	for bad in ' ' $'\t' $'\n' '*' '?' '[' ']' '$' '"' "'" '`' '\'; do
		for v in MODEL MACHINE ART ARTIFACTS A B CMP_OUT PREFILL; do
			run --separate-stderr make -C "$ROOT" --no-print-directory -n capture "$v=$d/a${bad}b"
			assert_failure
			[[ $stderr == *"$v: a path with a space"* ]] || fail "$v with '$bad': $stderr"
		done
	done
	[ -e d/experiments/keep ] && [ -e d/figures/keep ] || fail "a file outside amp's own was deleted"
	[ ! -e "$ROOT/artifacts/m" ] || fail "a flow ran"
}

@test "an existing directory amp did not make is refused as ART or CMP_OUT, and nothing in it changes" {
	# a directory of the user's, with names a flow would remove or overwrite
	mkdir -p mine/report
	touch mine/report.html mine/plan.yaml mine/summary.txt mine/x.tmp mine/report/keep
	( cd mine && find . -type f | sort | xargs sha256sum ) > before.sum
	local g
	for g in plan capture report trace validate; do
		ART=$BATS_TEST_TMPDIR/mine
		flow "$g" MODEL=$TINY
		assert_failure
		[[ $stderr == *"mine exists and amp did not make it (no .amp-artifacts in it)"* ]] ||
			fail "$g: not refused: $stderr"
	done
	( cd mine && find . -type f | sort | xargs sha256sum ) > after.sum
	cmp before.sum after.sum || fail "the user's directory changed"
	[ ! -e mine/.lock ] && [ ! -e mine/.amp-artifacts ] || fail "amp wrote into it"
	# a file in ART's place is refused the same way
	echo data > afile
	ART=$BATS_TEST_TMPDIR/afile
	flow capture MODEL=$TINY
	assert_failure
	[ "$(cat afile)" = data ] || fail "the file changed"
	# CMP_OUT: make report-compare into the user's directory
	ART=$BATS_TEST_TMPDIR/art
	flow capture MODEL=$TINY
	assert_success
	run --separate-stderr make -C "$ROOT" --no-print-directory "${SAN_ARG[@]}" BIN="$BIN" \
		report-compare A="$ART" B="$ART" CMP_OUT="$BATS_TEST_TMPDIR/mine"
	assert_failure
	[[ $stderr == *"mine exists and amp did not make it"* ]] || fail "CMP_OUT not refused: $stderr"
	( cd mine && find . -type f | sort | xargs sha256sum ) > after.sum
	cmp before.sum after.sum || fail "the user's directory changed"
}

@test "a directory amp made is marked and taken again; an empty one is taken and marked" {
	flow capture MODEL=$TINY
	assert_success
	[ -s "$ART/.amp-artifacts" ] || fail "no mark in ART"
	flow capture MODEL=$TINY
	assert_success
	mkdir empty
	ART=$BATS_TEST_TMPDIR/empty
	flow plan MODEL=$TINY
	assert_success
	[ -s empty/.amp-artifacts ] && [ -s empty/plan.yaml ] || fail "the empty directory was not taken"
}

@test "make trace waits for the lock of a make writing the same artifacts" {
	flow capture MODEL=$TINY
	assert_success
	flock "$ART/.lock" sleep 2 &
	sleep 0.3
	flow trace MODEL=$TINY
	assert_success
	wait
	[[ $stderr == *"make: another make is writing $ART; waiting for it"* ]] || fail "trace did not wait: $stderr"
	[ -s "$ART/trace.json.gz" ] || fail "no trace"
}
