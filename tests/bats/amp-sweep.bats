#!/usr/bin/env bats
# amp-sweep: a spec becomes a directory of jobs (the same bytes every
# time); the jobs run through make -j2, GNU parallel (locally and through
# --sshlogin, ssh stood in for by a local command) and a Slurm array with
# the same merged table; a finished job is not redone, a deleted or
# interrupted one is; the merge ranks by the figure, marks what does not
# fit, and lists what is missing; malformed specs (tests/bad/sweep-*) are
# rejected at their line and column.

load common
bats_require_minimum_version 1.5.0

# six jobs on tiny-mlp: three batch sizes, the machine's limits and a table
# budget no tile meets
spec() {
	cat > "${1:-spec.yaml}" <<EOF
amp-sweep: 1
name: tiny
models: [$MODELS/tiny-mlp.yaml]
batch: [1, 2, 4]
limits:
  machine: ""
  tiny: "--table-budget 100"
EOF
}

# mtime of every result, one "job mtime" a line
mtimes() {
	local f
	for f in "$1"/jobs/*/result.json; do
		printf '%s %s\n' "$(basename "$(dirname "$f")")" "$(stat -c %Y.%y "$f")"
	done
}

@test "sweep jobs: one job a candidate, jobs.txt, Makefile and slurm.sbatch, the same bytes every time" {
	spec
	run --separate-stderr amp-sweep jobs -o sw spec.yaml
	assert_success
	assert_equal "$stderr" "amp-sweep: 6 jobs in sw/jobs.txt"
	assert_equal "$(wc -l < sw/jobs.txt)" 6
	# amp-sweep by its absolute path: no amp-sweep on PATH needed to run a job
	local self
	self=$(readlink -f "$(command -v amp-sweep)")
	assert_equal "$(sed -n 1p sw/jobs.txt)" "$self run sw/jobs/000001"
	assert_equal "$(sed -n 6p sw/jobs.txt)" "$self run sw/jobs/000006"
	grep -qxF "AMP_SWEEP ?= $self" sw/Makefile || fail "the Makefile does not call $self"
	assert_equal "$(sed -n 1p sw/index.tsv)" $'job\tmodel\tbatch\tlimits'
	assert_equal "$(sed -n 4p sw/index.tsv)" $'000003\ttiny-mlp\t2\tmachine'
	[ -f sw/Makefile ] && [ -f sw/slurm.sbatch ] && [ -d sw/slurm ] || fail "a file is missing"
	grep -q '^#SBATCH --array=1-6$' sw/slurm.sbatch || fail "no array of 6"
	# the derived models: the batch replaced, the rest as it was
	assert_equal "$(ls sw/models)" $'tiny-mlp-b1.yaml\ntiny-mlp-b2.yaml\ntiny-mlp-b4.yaml'
	grep -q 'x: {shape: \[4, 37, 80\], dtype: fp16}' sw/models/tiny-mlp-b4.yaml || fail "batch 4 not set"
	grep -q 'mlp_down: {grid: \[3, 2, 5\], cast: late}' sw/models/tiny-mlp-b4.yaml || fail "the model's pins lost"
	run amp-plan -o /dev/null sw/models/tiny-mlp-b4.yaml
	assert_success
	grep -q 'limits: {table_budget: 100}' sw/jobs/000002/job.yaml || fail "job 2's limits"
	# no absolute path but the spec's own and amp-sweep's
	! grep -rq "$BATS_TEST_TMPDIR" sw || fail "an absolute path in the directory"
	[ "$(grep -rl "^/" sw | sort | tr '\n' ' ')" = "sw/jobs.txt " ] || fail "an absolute path outside jobs.txt"
	# the same spec again, here and in another directory: the same bytes, nothing rewritten
	local before
	before=$(find sw -type f -printf '%p %T@\n' | sort)
	run amp-sweep jobs -o sw spec.yaml
	assert_success
	assert_equal "$(find sw -type f -printf '%p %T@\n' | sort)" "$before"
	mkdir other && (cd other && spec && amp-sweep jobs -o sw spec.yaml 2>/dev/null)
	diff -r sw other/sw || fail "another run wrote other bytes"
	# the amp-sweep that wrote it is an input: a copy elsewhere writes other
	# commands, and is refused in this directory
	mkdir elsewhere && cp "$(command -v amp-sweep)" elsewhere/
	run --separate-stderr elsewhere/amp-sweep jobs -o sw spec.yaml
	assert_failure 1
	[[ $stderr == "amp-sweep: 'sw/jobs.txt' differs from what this spec writes (another sweep, its inputs changed, or an amp-sweep elsewhere wrote it)"* ]] ||
		fail "$stderr"
}

@test "sweep: make -j2 and GNU parallel run the jobs to the same merged table" {
	command -v parallel >/dev/null || skip "GNU parallel is not installed (Debian package parallel)"
	spec
	amp-sweep jobs -o mk spec.yaml 2>/dev/null
	amp-sweep jobs -o par spec.yaml 2>/dev/null
	run make -s -C mk -j2
	assert_success
	run parallel --will-cite -j2 < par/jobs.txt
	assert_success
	[ "$(ls mk/jobs/*/result.json | wc -l)" = 6 ] || fail "make left jobs undone"
	[ "$(ls par/jobs/*/result.json | wc -l)" = 6 ] || fail "parallel left jobs undone"
	run --separate-stderr amp-sweep merge -o mk.tsv mk
	assert_success
	assert_equal "$stderr" ""
	amp-sweep merge -o par.tsv par
	cmp mk.tsv par.tsv || fail "make and parallel merged differently"
	assert_equal "$(wc -l < mk.tsv)" 7
	# each job's capture is the pipeline's own
	amp-plan mk/models/tiny-mlp-b2.yaml | amp-compose | amp-expand |
		amp-exchange | amp-group | amp-capture --table-budget 100 -o direct.json
	cmp direct.json mk/jobs/000004/capture.json || fail "job 4's capture is not the pipeline's"
	# make merge writes the same table to merge.tsv, and nothing of it on
	# standard output, where make -C writes "Entering directory"
	run --separate-stderr make -C mk merge
	assert_success
	[[ $output != *$'\t'* ]] || fail "make merge printed table rows: $output"
	assert_equal "$stderr" "amp-sweep: the merged table is in $BATS_TEST_TMPDIR/mk/merge.tsv"
	cmp mk.tsv mk/merge.tsv || fail "make merge wrote another table"
}

@test "sweep: jobs.txt runs unchanged through GNU parallel's --sshlogin on two hosts (ssh stood in for by a local command)" {
	command -v parallel >/dev/null || skip "GNU parallel is not installed (Debian package parallel)"
	spec
	amp-sweep jobs -o mk spec.yaml 2>/dev/null
	amp-sweep jobs -o ssh spec.yaml 2>/dev/null
	make -s -C mk -j2
	# ssh HOST -- COMMAND: the command run here, as ssh runs it on HOST,
	# and the host logged: parallel's remote path (its wrapper, --workdir)
	# without a network. A login through ssh sets SHELL (parallel's remote
	# wrapper runs the job with it), whatever the caller's environment: CI
	# may have none.
	printf '%s\n' '#!/bin/bash' "echo \"\$1\" >> '$BATS_TEST_TMPDIR/hosts.log'" 'shift' \
		'[ "${1:-}" = -- ] && shift' 'SHELL=/bin/bash exec bash -c "$*"' > fakessh
	chmod +x fakessh
	run parallel --will-cite --ssh "$BATS_TEST_TMPDIR/fakessh" --sshlogin 1/node1,1/node2 \
		--workdir "$BATS_TEST_TMPDIR" < ssh/jobs.txt
	assert_success
	[ "$(ls ssh/jobs/*/result.json | wc -l)" = 6 ] || fail "parallel over ssh left jobs undone"
	# both hosts ran jobs
	run sort -u hosts.log
	assert_output $'node1\nnode2'
	amp-sweep merge -o mk.tsv mk
	amp-sweep merge -o ssh.tsv ssh
	cmp mk.tsv ssh.tsv || fail "make and parallel over ssh merged differently"
}

@test "sweep: a finished job is not redone; a deleted result or an interrupted run is" {
	spec
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	make -s -C sw -j2
	local before after
	before=$(mtimes sw)
	sleep 1.1
	run make -C sw -j2
	assert_success
	assert_output --partial "Nothing to be done"
	run amp-sweep run sw/jobs/000001 sw/jobs/000005    # by hand: skipped
	assert_success
	assert_equal "$(mtimes sw)" "$before"
	# job 3 loses its result, job 5 was interrupted (a work directory, no result)
	rm sw/jobs/000003/result.json
	rm sw/jobs/000005/result.json && mkdir sw/jobs/000005/work && touch sw/jobs/000005/work/grouped.yaml.zst
	run amp-sweep merge sw
	assert_success
	assert_equal "$(grep -c $'\tmissing\t' <<<"$output")" 2
	run --separate-stderr amp-sweep merge sw
	assert_equal "$stderr" "amp-sweep: 2 of 6 jobs missing (no result yet): 000003 000005"
	make -s -C sw -j2
	after=$(mtimes sw)
	assert_equal "$(diff <(echo "$before") <(echo "$after") | grep -c '^>')" 2
	diff <(echo "$before") <(echo "$after") | grep '^>' | grep -q '^> 000003 ' || fail "job 3 not redone"
	diff <(echo "$before") <(echo "$after") | grep '^>' | grep -q '^> 000005 ' || fail "job 5 not redone"
	[ ! -e sw/jobs/000005/work ] || fail "the interrupted run's work directory is left"
	run --separate-stderr amp-sweep merge sw
	assert_equal "$stderr" ""
}

@test "sweep merge: ranked by the figure, OVER where a limit is exceeded, JSON with the same rows" {
	spec
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	make -s -C sw -j2
	amp-sweep merge -o m.tsv sw
	local col
	col=$(head -1 m.tsv | tr '\t' '\n' | grep -nx total_cycles | cut -d: -f1)
	tail -n +2 m.tsv | cut -f"$col" | sort -n -c || fail "not ranked by total_cycles"
	# the ties keep job order, and each figure is the capture's
	local id total
	while IFS=$'\t' read -r id _ _ _ _ _ _ _ _ rest; do
		total=$(cut -f"$col" <<<"$(grep "^$id" m.tsv)")
		assert_equal "$total" "$(jq .summary.total_cycles "sw/jobs/$id/capture.json")"
	done < <(tail -n +2 m.tsv)
	# a result's summary: the capture's integer figures, the bound's and the plan floor's in their place, no ratio
	run jq -n --slurpfile r sw/jobs/000001/result.json --slurpfile c sw/jobs/000001/capture.json \
		'$r[0].summary == ($c[0].summary | del(.exchange_floor_ratio, .bound, .plan_floor, .microseconds, .throughput)
			+ (.bound | del(.ratio)) + (.plan_floor | del(.ratio)))
		 and ($r[0].summary | keys_unsorted | index("total_floor_cycles") > index("exchange_floor_cycles"))'
	assert_output true
	amp-sweep merge --rank total_floor_cycles -o f.tsv sw
	col=$(head -1 f.tsv | tr '\t' '\n' | grep -nx total_floor_cycles | cut -d: -f1)
	tail -n +2 f.tsv | cut -f"$col" | sort -n -c || fail "not ranked by total_floor_cycles"
	# the tiny table budget: OVER in the fit and tables columns, fit otherwise
	run awk -F'\t' 'NR > 1 { print $4, $6, $7, $8, $9 }' m.tsv
	assert_output "$(printf '%s\n' 'machine fit fit fit fit' 'tiny OVER OVER fit fit' 'machine fit fit fit fit' \
		'tiny OVER OVER fit fit' 'machine fit fit fit fit' 'tiny OVER OVER fit fit')"
	run jq -r '.fit, .emit_message, .limits.tables.limit' sw/jobs/000002/result.json
	assert_line --index 0 OVER
	assert_line --index 1 --regexp '^amp-emit: tile [0-9]+: exchange tables need [0-9]+ bytes .*over the table budget of 100 bytes'
	assert_line --index 2 100
	# another figure
	amp-sweep merge --rank max_table_bytes -o t.tsv sw
	col=$(head -1 t.tsv | tr '\t' '\n' | grep -nx max_table_bytes | cut -d: -f1)
	tail -n +2 t.tsv | cut -f"$col" | sort -n -c || fail "not ranked by max_table_bytes"
	run --separate-stderr amp-sweep merge --rank no_such_figure sw
	assert_failure 1
	[[ $stderr == *"no figure 'no_such_figure'"*total_cycles* ]] || fail "$stderr"
	# JSON: the same rows in the same order
	amp-sweep merge --json -o m.json sw
	run jq -r '.format, .jobs, .finished, .missing, (.axes | join(","))' m.json
	assert_output $'amp-sweep-merge\n6\n6\n0\nmodel,batch,limits'
	assert_equal "$(jq -r '.rows[] | "\(.job) \(.fit) \(.limits.tables) \(.summary.total_cycles)"' m.json)" \
		"$(awk -F'\t' -v c="$col" 'NR > 1 { print $1, $6, $7 }' m.tsv | while read -r a b c2; do
			echo "$a $b $c2 $(jq .summary.total_cycles sw/jobs/$a/capture.json)"; done)"
}

@test "sweep: a candidate the pipeline refuses is a result (failed, ranked last); pins are merged into the model" {
	cat > spec.yaml <<EOF
amp-sweep: 1
models: [$MODELS/tiny-mlp.yaml]
pins:
  up3: {mlp_up: {grid: [1, 1, 3], cast: early}, mlp_down: {cast: early}}
  rows99: {mlp_up: {grid: [99, 1, 1]}}
plan_flags:
  memory: ""
  cycles: "--objective cycles"
EOF
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	grep -q 'mlp_down: {grid: \[3, 2, 5\], cast: early}' sw/models/tiny-mlp-up3.yaml || fail "pins not merged"
	grep -q 'mlp_up: {grid: \[1, 1, 3\], cast: early}' sw/models/tiny-mlp-up3.yaml || fail "pin not added"
	grep -q 'plan_flags: \[--objective, cycles\]' sw/jobs/000002/job.yaml || fail "plan flags"
	run --separate-stderr amp-sweep merge sw
	assert_success
	assert_equal "$stderr" "amp-sweep: 4 of 4 jobs missing (no result yet): 000001 000002 000003 000004"
	assert_equal "$(tail -n +2 <<<"$output" | cut -f5 | sort -u)" missing
	make -s -C sw -j2
	run amp-sweep merge sw
	assert_success
	# the two that ran first (in total_cycles order), then the refused ones in job order
	assert_equal "$(cut -f5 <<<"$output" | tail -n +2 | tr '\n' ' ')" "ok ok failed:amp-plan failed:amp-plan "
	assert_equal "$(cut -f1 <<<"$output" | tail -n 2 | tr '\n' ' ')" "000003 000004 "
	run jq -r '.status, .stage, .message' sw/jobs/000003/result.json
	assert_line --index 0 failed
	assert_line --index 1 amp-plan
	assert_line --index 2 --regexp "^amp-plan: .*mlp_up"
	amp-sweep merge --json sw | jq -e '.rows[2].message | test("amp-plan")' >/dev/null
}

@test "sweep merge rejects a result or an index it did not write, naming the file" {
	spec
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	amp-sweep run sw/jobs/000001
	jq '.format = "amp-capture"' sw/jobs/000001/result.json > x && mv x sw/jobs/000001/result.json
	run --separate-stderr amp-sweep merge -o m.tsv sw
	assert_failure 1
	[[ $stderr =~ ^amp-sweep:\ sw/jobs/000001/result\.json:[0-9]+:[0-9]+:\ format\ \'amp-capture\'\ is\ not\ a\ sweep\ result$ ]] || fail "$stderr"
	[ ! -e m.tsv ] || fail "m.tsv written on failure"
	printf '{"format": "amp-sweep-result", "status": ' > sw/jobs/000001/result.json
	run --separate-stderr amp-sweep merge sw
	assert_failure 1
	[[ $stderr == "amp-sweep: sw/jobs/000001/result.json:"* ]] || fail "$stderr"
	printf 'nothing\n' > sw/index.tsv
	run --separate-stderr amp-sweep merge sw
	assert_failure 1
	[[ $stderr == *"sw/index.tsv"*"not a sweep's index"* ]] || fail "$stderr"
	run --separate-stderr amp-sweep merge nowhere
	assert_failure 1
	[[ $stderr == *"cannot open 'nowhere/index.tsv'"* ]] || fail "$stderr"
}

@test "sweep merge refuses a result that is not its directory's job's: copied from another job, or from other inputs" {
	spec
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	amp-sweep run sw/jobs/000001 sw/jobs/000003
	jq -e '.version == 2 and .job == "000001" and (.job_fnv1a | test("^[0-9a-f]{16}$"))' \
		sw/jobs/000001/result.json >/dev/null || fail "$(cat sw/jobs/000001/result.json)"
	run amp-sweep merge sw
	assert_success
	# job 1's result (batch 1) copied over job 3's (batch 2)
	cp sw/jobs/000003/result.json keep.json
	cp sw/jobs/000001/result.json sw/jobs/000003/result.json
	run --separate-stderr amp-sweep merge -o m.tsv sw
	assert_failure 1
	[[ $stderr =~ ^amp-sweep:\ sw/jobs/000003/result\.json:[0-9]+:[0-9]+:\ the\ result\ of\ job\ \'000001\',\ in\ job\ 000003\'s\ directory$ ]] ||
		fail "$stderr"
	[ ! -e m.tsv ] || fail "m.tsv written on failure"
	# the same, its job id edited to match: the job file's hash differs
	jq '.job = "000003"' sw/jobs/000001/result.json > sw/jobs/000003/result.json
	run --separate-stderr amp-sweep merge sw
	assert_failure 1
	[[ $stderr == "amp-sweep: sw/jobs/000003/result.json:"*"the result of a job file with hash "*"run the job again" ]] ||
		fail "$stderr"
	# the job's own result, its job file edited after it ran
	cp keep.json sw/jobs/000003/result.json
	run amp-sweep merge sw
	assert_success
	sed -i "s/batch: '2'/batch: '3'/" sw/jobs/000003/job.yaml
	run --separate-stderr amp-sweep merge sw
	assert_failure 1
	[[ $stderr == *"job.yaml hashes to"*"(its inputs changed)"* ]] || fail "$stderr"
	# a result of the previous version
	cp keep.json sw/jobs/000003/result.json
	sed -i "s/batch: '3'/batch: '2'/" sw/jobs/000003/job.yaml
	jq '.version = 1' keep.json > sw/jobs/000003/result.json
	run --separate-stderr amp-sweep merge sw
	assert_failure 1
	[[ $stderr == *"result version 1 (this amp reads 2): run the job again" ]] || fail "$stderr"
}

@test "sweep run holds a job.yaml to the spec's rules: a tampered job writes nothing outside its directory" {
	spec
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	local j=sw/jobs/000001 keep
	keep=$(cat $j/job.yaml)
	tamper() { printf '%s\n' "$keep" | sed "$1" > $j/job.yaml; }
	# a reserved flag: the job would write its plan outside
	tamper "s|plan_flags: \[\]|plan_flags: [-o, $PWD/outside.yaml]|"
	run --separate-stderr amp-sweep run $j
	assert_failure 1
	[[ $stderr == "amp-sweep: $j: $j/job.yaml:6:"*"flag '-o' is the sweep's own"* ]] || fail "$stderr"
	tamper "s|group_flags: \[\]|group_flags: [--out=$PWD/outside.yaml]|"
	run --separate-stderr amp-sweep run $j
	assert_failure 1
	[[ $stderr == *"flag '--out=$PWD/outside.yaml' is the sweep's own ('--output')"* ]] || fail "$stderr"
	# a word a shell would change
	tamper "s|plan_flags: \[\]|plan_flags: ['\$HOME']|"
	run --separate-stderr amp-sweep run $j
	assert_failure 1
	[[ $stderr == *"has a character a shell or make would change ('\$')"* ]] || fail "$stderr"
	# a model or machine other than the sweep's own copies
	tamper "s|model: ../../models/|model: ../../../../|"
	run --separate-stderr amp-sweep run $j
	assert_failure 1
	[[ $stderr == *"model '../../../../tiny-mlp-b1.yaml' is not the sweep's own copy"* ]] || fail "$stderr"
	tamper "s|^limits:|machine: /etc/passwd\nlimits:|"
	run --separate-stderr amp-sweep run $j
	assert_failure 1
	[[ $stderr == *"machine '/etc/passwd' is not the sweep's own copy"* ]] || fail "$stderr"
	[ ! -e outside.yaml ] && [ ! -e pwned ] && [ ! -e $j/result.json ] || fail "a tampered job wrote"
	# the job as amp-sweep wrote it runs
	printf '%s\n' "$keep" > $j/job.yaml
	run amp-sweep run $j
	assert_success
	[ -e $j/result.json ] || fail "no result"
}

@test "sweep jobs refuses a directory that holds another sweep" {
	spec
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	sed -i 's/\[1, 2, 4\]/[1, 2, 8]/' spec.yaml
	run --separate-stderr amp-sweep jobs -o sw spec.yaml
	assert_failure 1
	[[ $stderr == "amp-sweep: 'sw/"*"differs from what this spec writes"* ]] || fail "$stderr"
	assert_equal "$(sed -n 1p sw/index.tsv)" $'job\tmodel\tbatch\tlimits'
	grep -q 'b4' <(ls sw/models) || fail "the old sweep was changed"
}

@test "sweep: usage errors exit 2" {
	spec
	run --separate-stderr amp-sweep
	assert_failure 2
	run --separate-stderr amp-sweep jobs spec.yaml
	assert_failure 2
	[[ $stderr == *"-o DIR"* ]] || fail "$stderr"
	run --separate-stderr amp-sweep jobs -o 'a dir' spec.yaml
	assert_failure 2
	# a directory a job's command would read as an option
	run --separate-stderr amp-sweep jobs -o -dash spec.yaml
	assert_failure 2
	[[ $stderr == "amp-sweep: -o '-dash': "*"not starting with '-'"* ]] || fail "$stderr"
	[ ! -e ./-dash ] || fail "-dash was written"
	# abbreviations are refused, not taken for the option they begin
	run --separate-stderr amp-sweep jobs --out sw spec.yaml
	assert_failure 2
	[[ $stderr == "amp-sweep: option '--out' is an abbreviation; write it whole: '--output'"* ]] || fail "$stderr"
	[ ! -e sw ] || fail "sw was written"
	run --separate-stderr amp-sweep merge --ra total_cycles sw
	assert_failure 2
	[[ $stderr == *"'--ra' is an abbreviation"*"'--rank'"* ]] || fail "$stderr"
	run --separate-stderr amp-sweep frobnicate
	assert_failure 2
	run --separate-stderr amp-sweep run
	assert_failure 2
	run --separate-stderr amp-sweep merge --bogus x
	assert_failure 2
	run amp-sweep --version
	assert_success
	assert_output --regexp '^amp-sweep \(amp\) '
	run amp-sweep --help
	assert_success
	assert_output --partial 'amp-sweep merge [--rank FIGURE]'
	run --separate-stderr amp-sweep run no/such/job
	assert_failure 1
	[[ $stderr == "amp-sweep: no/such/job: cannot open 'no/such/job/job.yaml'"* ]] || fail "$stderr"
}

@test "sweep: sweeps/tiny.yaml runs as docs/sweeps.md says, from a PATH without amp-sweep" {
	cp -r "$ROOT/sweeps" "$ROOT/share" .
	run --separate-stderr env PATH=/usr/bin:/bin "$ROOT/bin/amp-sweep" jobs -o study sweeps/tiny.yaml
	assert_success
	assert_equal "$stderr" "amp-sweep: 6 jobs in study/jobs.txt"
	# make and jobs.txt call amp-sweep by its path, not through PATH
	run env PATH=/usr/bin:/bin make -s -C study -j2
	assert_success
	[ "$(ls study/jobs/*/result.json | wc -l)" = 6 ] || fail "make left jobs undone"
	rm study/jobs/000003/result.json
	run env PATH=/usr/bin:/bin bash study/jobs.txt
	assert_success
	[ -s study/jobs/000003/result.json ] || fail "jobs.txt did not run job 3"
	run env PATH=/usr/bin:/bin make -C study merge
	assert_success
	run column -t -s $'\t' study/merge.tsv
	assert_success
	assert_equal "${#lines[@]}" 7
	assert_line --index 0 --regexp '^job +model +batch +limits +status +fit '
	assert_line --index 1 --regexp '^000001 +tiny-mlp +1 +machine +ok +fit '
	run "$ROOT/bin/amp-sweep" merge study
	assert_success
	assert_equal "$output" "$(cat study/merge.tsv)"
}

@test "sweep run: progress on a terminal, jobs done out of the sweep's; nothing when standard error is not a terminal" {
	spec
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	run --separate-stderr amp-sweep run sw/jobs/000001
	assert_success
	assert_equal "$stderr" ""
	assert_equal "$output" ""
	[ -s sw/jobs/000001/result.json ] || fail "job 1 not run"
	command -v script >/dev/null || skip "util-linux's script is not installed (Debian package bsdutils)"
	run script -qec "amp-sweep run sw/jobs/000002 sw/jobs/000001" /dev/null
	assert_success
	assert_equal "$(tr -d '\r' <<<"$output")" $'amp-sweep: 2 of 6 jobs done: sw/jobs/000002\namp-sweep: 2 of 6 jobs done: sw/jobs/000001 (already)'
}

@test "sweep plot: a PNG of a figure against an axis, the same bytes from the same results, wherever the directory" {
	command -v gnuplot >/dev/null || skip "gnuplot is not installed (Debian package gnuplot-nox: make sweep-deps)"
	spec
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	make -s -C sw -j2
	run --separate-stderr amp-sweep plot total_cycles --by batch -o batch.png sw
	assert_success
	assert_equal "$stderr" ""
	assert_equal "$(head -c 8 batch.png | od -An -tx1 | tr -d ' ')" 89504e470d0a1a0a
	[ "$(stat -c %s batch.png)" -gt 5000 ] || fail "a PNG too small to hold a figure"
	# the figure's values are what gnuplot draws: its script, seen through a stand-in
	printf '%s\n' '#!/bin/bash' "cat > '$BATS_TEST_TMPDIR/plot.gp'" 'printf PNG' > fakegnuplot
	chmod +x fakegnuplot
	GNUPLOT=$PWD/fakegnuplot run amp-sweep plot total_cycles --by batch -o fake.png sw
	assert_success
	grep -q "^set title 'total_cycles by batch'$" plot.gp || fail "no title"
	grep -q '^set xtics (1, 2, 4)$' plot.gp || fail "the batch sizes are not the x tics"
	local b y
	for b in 1 2 4; do
		y=$(jq .summary.total_cycles "sw/jobs/$(printf '%06d' $((b == 1 ? 1 : b == 2 ? 3 : 5)))/capture.json")
		grep -qx "$b $y" plot.gp || fail "batch $b: no point at $y"
	done
	grep -q "title 'model=tiny-mlp limits=machine'" plot.gp || fail "the series are not named by the other axes"
	# a categorical axis: its labels as tics, in job order
	GNUPLOT=$PWD/fakegnuplot run amp-sweep plot max_table_bytes --by limits -o fake.png sw
	assert_success
	grep -q '^0 [0-9]* machine$' plot.gp && grep -q '^1 [0-9]* tiny$' plot.gp || fail "limits not on x"
	# the same results elsewhere: the same bytes
	cp -r sw other
	amp-sweep plot total_cycles --by batch -o again.png other
	cmp batch.png again.png || fail "another directory of the same results drew other bytes"
	# a job without a result is left out, and said so
	rm sw/jobs/000006/result.json
	run --separate-stderr amp-sweep plot total_cycles --by batch -o less.png sw
	assert_success
	assert_equal "$stderr" "amp-sweep: 1 jobs left out of the plot (failed, or no result yet)"
}

@test "sweep plot: a label or figure changed in the sweep's files never reaches gnuplot's script" {
	spec
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	make -s -C sw -j2
	printf '%s\n' '#!/bin/bash' "cat > '$BATS_TEST_TMPDIR/plot.gp'" 'printf PNG' > fakegnuplot
	chmod +x fakegnuplot
	cp sw/index.tsv index.orig
	# a label that would end gnuplot's string and run a command
	sed "s/\ttiny\$/\ttiny'.system(\"touch pwned\").'/" index.orig > sw/index.tsv
	! cmp -s index.orig sw/index.tsv || fail "no label changed"
	GNUPLOT=$PWD/fakegnuplot run --separate-stderr amp-sweep plot total_cycles --by batch -o p.png sw
	assert_failure 1
	[[ $stderr == *"has a label that is not letters, digits and . _ + -"* ]] || fail "$stderr"
	[ ! -e plot.gp ] && [ ! -e p.png ] || fail "gnuplot ran"
	# a plotted value that is not a number
	cp index.orig sw/index.tsv
	sed -i 's/"total_cycles": [0-9]*/"total_cycles": "1e3x"/' sw/jobs/000001/result.json
	grep -q '"1e3x"' sw/jobs/000001/result.json || fail "no value changed"
	GNUPLOT=$PWD/fakegnuplot run --separate-stderr amp-sweep plot total_cycles --by batch -o p.png sw
	assert_failure 1
	[[ $stderr == *"job '000001' has a label that is not letters, digits and . _ + -, or a 'total_cycles' that is not a number"* ]] ||
		fail "$stderr"
	[ ! -e plot.gp ] || fail "gnuplot ran"
	[ ! -e pwned ] || fail "a command ran"
}

@test "sweep plot: a missing gnuplot, an unknown axis or figure fail with a clear message and no file" {
	spec
	amp-sweep jobs -o sw spec.yaml 2>/dev/null
	amp-sweep run sw/jobs/000001
	GNUPLOT=$BATS_TEST_TMPDIR/no-gnuplot run --separate-stderr amp-sweep plot total_cycles --by batch -o p.png sw
	assert_failure 1
	[[ $stderr == "amp-sweep: plot needs gnuplot, and '$BATS_TEST_TMPDIR/no-gnuplot' cannot be run: No such file or directory (Debian package gnuplot-nox"* ]] ||
		fail "$stderr"
	run --separate-stderr amp-sweep plot total_cycles --by batches -o p.png sw
	assert_failure 1
	assert_equal "$stderr" "amp-sweep: 'sw' has no axis 'batches' (its axes: model, batch, limits)"
	run --separate-stderr amp-sweep plot total_cycle --by batch -o p.png sw
	assert_failure 1
	[[ $stderr == "amp-sweep: no figure 'total_cycle' in the results (figures: "* ]] || fail "$stderr"
	[ ! -e p.png ] || fail "p.png written on failure"
	run --separate-stderr amp-sweep plot total_cycles -o p.png sw
	assert_failure 2
	[[ $stderr == *"plot needs --by AXIS"* ]] || fail "$stderr"
}

# ---- a one-node Slurm cluster (root, slurm-wlm and munge installed) ----

# slurm_up: munged, slurmctld and slurmd of this test alone (their own
# socket, ports, state and logs in $BATS_TEST_TMPDIR/slurm), the node
# this host with 2 CPUs; SLURM_CONF names its slurm.conf.
slurm_up() {
	local t=$BATS_TEST_TMPDIR/slurm h i port
	h=$(hostname -s)
	port=$((20000 + RANDOM % 10000 * 2))
	mkdir -p "$t/state" "$t/spool"
	install -m 600 /etc/munge/munge.key "$t/munge.key"
	munged --force --socket="$t/munge.sock" --key-file="$t/munge.key" --pid-file="$t/munged.pid" \
		--log-file="$t/munged.log" --seed-file="$t/munge.seed" || return 1
	printf '%s\n' "ClusterName=ampsweep" "SlurmctldHost=$h" "SlurmctldPort=$port" "SlurmdPort=$((port + 1))" \
		"AuthType=auth/munge" "AuthInfo=socket=$t/munge.sock" "CredType=cred/munge" \
		"SlurmUser=root" "SlurmdUser=root" "StateSaveLocation=$t/state" "SlurmdSpoolDir=$t/spool" \
		"SlurmctldPidFile=$t/slurmctld.pid" "SlurmdPidFile=$t/slurmd.pid" \
		"SlurmctldLogFile=$t/slurmctld.log" "SlurmdLogFile=$t/slurmd.log" \
		"ProctrackType=proctrack/linuxproc" "TaskPlugin=task/none" "JobAcctGatherType=jobacct_gather/none" \
		"AccountingStorageType=accounting_storage/none" "JobCompType=jobcomp/none" \
		"SelectType=select/cons_tres" "SelectTypeParameters=CR_CPU" "SchedulerType=sched/builtin" \
		"ReturnToService=2" "MpiDefault=none" \
		"NodeName=$h NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN" \
		"PartitionName=sweep Nodes=ALL Default=YES MaxTime=INFINITE State=UP" > "$t/slurm.conf"
	export SLURM_CONF=$t/slurm.conf
	slurmctld || return 1
	slurmd || return 1
	for i in $(seq 60); do
		sinfo -h -o %t 2>/dev/null | grep -qx idle && return 0
		sleep 0.5
	done
	echo "the node did not come up:" >&2
	tail -n 5 "$t/slurmctld.log" "$t/slurmd.log" >&2
	return 1
}

# Stops what slurm_up started, by its pid files.
teardown() {
	local t=$BATS_TEST_TMPDIR/slurm p
	[ -d "$t" ] || return 0
	for p in slurmd slurmctld munged; do
		[ -s "$t/$p.pid" ] && kill "$(cat "$t/$p.pid")" 2>/dev/null
	done
	return 0
}

@test "sweep: a Slurm job array runs jobs.txt to the make table" {
	[ "$(id -u)" = 0 ] || skip "the one-node Slurm cluster needs root"
	command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null ||
		skip "Slurm is not installed (Debian package slurm-wlm)"
	command -v munged >/dev/null && [ -r /etc/munge/munge.key ] || skip "munge is not installed (Debian package munge)"
	spec
	amp-sweep jobs -o mk spec.yaml 2>/dev/null
	amp-sweep jobs -o sl spec.yaml 2>/dev/null
	make -s -C mk -j2
	slurm_up || fail "could not start the Slurm cluster"
	run timeout 300 sbatch --wait --array=1-6 sl/slurm.sbatch
	assert_success
	assert_output --regexp '^Submitted batch job [0-9]+$'
	assert_equal "$(ls sl/slurm/*.out | wc -l)" 6
	amp-sweep merge -o mk.tsv mk
	amp-sweep merge -o sl.tsv sl
	cmp mk.tsv sl.tsv || fail "Slurm and make merged differently"
	# a second array, three lines a task, does nothing: every job is done
	local before
	before=$(mtimes sl)
	SWEEP_PER_TASK=3 run timeout 300 sbatch --wait --array=1-2 sl/slurm.sbatch
	assert_success
	assert_equal "$(mtimes sl)" "$before"
}

# ---- malformed specs (tests/bad/sweep-*.yaml) ----

# sweep_rejects NAME LINE:COL MESSAGE: exit 1, one line naming the spec's
# file:line:col, nothing written.
sweep_rejects() {
	local file=$BAD/sweep-$1.yaml re
	run --separate-stderr amp-sweep jobs -o out "$file"
	assert_failure 1
	assert_equal "$output" ""
	re="^amp-sweep: $(re_quote "$file"):$2: "
	[[ $stderr =~ $re ]] || fail "expected a message at $file:$2, got: $stderr"
	[[ $stderr == *"$3"* ]] || fail "expected '$3' in: $stderr"
	[[ $stderr != *$'\n'* ]] || fail "expected one line, got: $stderr"
	[ ! -e out ] || fail "out was written"
}

@test "sweep rejects malformed specs at their line and column" {
	sweep_rejects unknown-key 4:1 "unknown key 'batches'"
	sweep_rejects version 2:12 "unsupported sweep version 2"
	sweep_rejects missing-models 2:1 "missing key 'models'"
	sweep_rejects empty-axis 4:8 "axis 'batch' is empty"
	sweep_rejects empty-map-axis 4:7 "axis 'pins' is empty"
	sweep_rejects batch-zero 4:12 "at least 1, found 0"
	sweep_rejects duplicate-value 4:15 "'1' appears twice in 'batch'"
	sweep_rejects pin-key 6:36 "unknown key 'order'"
	sweep_rejects pin-value 5:24 "pin 'cast' is 'early' or 'late'"
	sweep_rejects pin-unknown-op 7:9 "pins typo: pin for unknown op 'mlp_upp'"
	sweep_rejects layers-no-repeat 4:9 "model 'tiny-mlp' has 0 repeats"
	sweep_rejects limit-unknown 6:10 "unknown limit '--table-budgt'"
	sweep_rejects limit-value 5:10 "'--table-budget' takes a non-negative integer, not '-4096'"
	sweep_rejects reserved-flag 5:10 "flag '--machine' is the sweep's own"
	sweep_rejects bad-label 5:3 "label 'direct weights' is not letters, digits and . _ + - (not starting with '-')"
	sweep_rejects flag-quote 5:6 "a character a shell or make would change"
	sweep_rejects model-missing 3:44 "cannot open model"
	sweep_rejects tokens-no-input 4:9 "model 'siglip-so400m-1layer' has no input [batch, tokens, features]"
	# every tests/bad/sweep-* file is one of these
	assert_equal "$(ls "$BAD"/sweep-*.yaml | wc -l)" 18
}

@test "sweep: batch sets every state's leading dimension with the inputs', so a decoder's cache follows the batch" {
	cat > dec.yaml <<EOF2
amp-sweep: 1
name: dec
models: [$MODELS/qwen2.5-0.5b-1layer-decode.yaml]
batch: [2, 3]
EOF2
	run --separate-stderr amp-sweep jobs -o study dec.yaml
	assert_success
	local b
	for b in 2 3; do
		run grep -c "tok: {shape: \[$b, 1, 1\]\|pos: {shape: \[$b, 1, 1\]\|cache: {shape: \[$b, 2048, 256\]" \
			study/models/qwen2.5-0.5b-1layer-decode-b$b.yaml
		assert_output 3
	done
	# the shipped batch study's spec is whole: its twelve jobs are written
	run --separate-stderr amp-sweep jobs -o batch "$ROOT/sweeps/decode-batch.yaml"
	assert_success
	assert_equal "$stderr" "amp-sweep: 12 jobs in batch/jobs.txt"
}

@test "sweep: tokens sets every [batch, tokens, features] input's tokens, and names the derived model with -tN" {
	cat > pre.yaml <<EOF2
amp-sweep: 1
name: pre
models: [$MODELS/qwen2.5-0.5b-1layer-prefill.yaml]
batch: [1, 2]
tokens: [16, 64]
EOF2
	run --separate-stderr amp-sweep jobs -o study pre.yaml
	assert_success
	assert_equal "$stderr" "amp-sweep: 4 jobs in study/jobs.txt"
	assert_equal "$(head -1 study/index.tsv)" "$(printf 'job\tmodel\tbatch\ttokens')"
	local b t
	for b in 1 2; do
		for t in 16 64; do
			run grep -c "tok: {shape: \[$b, $t, 1\]\|pos: {shape: \[$b, $t, 1\]\|cache: {shape: \[$b, 2048, 256\]" \
				"study/models/qwen2.5-0.5b-1layer-prefill-b$b-t$t.yaml"
			assert_output 3
			run head -1 "study/models/qwen2.5-0.5b-1layer-prefill-b$b-t$t.yaml"
			assert_output --partial ", batch $b, $t tokens."
		done
	done
	# without the axis, the index has no tokens column
	sed '/^tokens:/d' pre.yaml > plain.yaml
	run --separate-stderr amp-sweep jobs -o plain plain.yaml
	assert_success
	assert_equal "$(head -1 plain/index.tsv)" "$(printf 'job\tmodel\tbatch')"
}
