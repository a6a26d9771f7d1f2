#!/usr/bin/env bats
# amp-plan: the command-line contract (options, input and output handling,
# exit status). The other suites: amp-plan-choices (what the plan says
# about the reference models, pins and objectives), amp-plan-fit (the
# machine's limits and SRAM) and amp-plan-bad (the malformed models in
# tests/bad/model-*.yaml).

bats_require_minimum_version 1.5.0
load common
load amp-plan

# (run --separate-stderr keeps its separate-stderr-* file in the test
# directory, so "nothing written" checks ignore it.)

# ---- options and usage ----

@test "plan --help prints usage and the exit statuses to stdout and exits 0" {
	run --separate-stderr amp-plan --help
	assert_success
	assert_equal "$stderr" ""
	assert_line --index 0 --partial 'Usage: amp-plan'
	assert_output --partial '--machine'
	assert_output --partial '--objective'
	assert_output --partial '--explain'
	assert_output --partial 'Exit status: 0 success, 1 bad input, a limit exceeded or a write error,'
}

@test "plan --version prints the tool name and a version number" {
	run --separate-stderr amp-plan --version
	assert_success
	assert_equal "$stderr" ""
	assert_output --regexp '^amp-plan \(amp\) [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "plan rejects an unknown long option with exit 2 and a pointer to --help" {
	run --separate-stderr amp-plan --frobnicate "$TINY"
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"Try 'amp-plan --help' for more information."* ]] || fail "$stderr"
}

@test "plan rejects an unknown short option with exit 2 and a pointer to --help" {
	run --separate-stderr amp-plan -x "$TINY"
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"Try 'amp-plan --help'"* ]] || fail "$stderr"
}

@test "plan rejects -o without a file name as a usage error" {
	run --separate-stderr amp-plan "$TINY" -o
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"Try 'amp-plan --help'"* ]] || fail "$stderr"
}

@test "plan rejects two model files as a usage error naming the second" {
	cp "$TINY" second.yaml
	run --separate-stderr amp-plan -o out.plan "$TINY" second.yaml
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"'second.yaml'"* ]] || fail "$stderr"
	[[ $stderr == *"Try 'amp-plan --help'"* ]] || fail "$stderr"
	[[ ! -e out.plan ]] || fail "out.plan was written on a usage error"
}

@test "plan rejects an unknown --objective as a usage error naming it" {
	run --separate-stderr amp-plan --objective=speed "$TINY"
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"'speed'"* ]] || fail "$stderr"
	[[ $stderr == *"Try 'amp-plan --help'"* ]] || fail "$stderr"
}

@test "plan rejects --explain=0 as a usage error" {
	run --separate-stderr amp-plan --explain=0 "$TINY"
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"--explain"* ]] || fail "$stderr"
	[[ $stderr == *"Try 'amp-plan --help'"* ]] || fail "$stderr"
}

@test "plan rejects a non-numeric --explain count as a usage error" {
	run --separate-stderr amp-plan --explain=5x "$TINY"
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"'5x'"* ]] || fail "$stderr"
}

# ---- input ----

@test "plan reads the model from a path, from stdin, and from '-' with identical output" {
	amp-plan "$TINY" >path.plan
	amp-plan <"$TINY" >stdin.plan
	amp-plan - <"$TINY" >dash.plan
	[[ -s path.plan ]] || fail "no plan written"
	# the same but the model's name: <stdin> from a pipe
	run same_but_provenance path.plan stdin.plan
	assert_success
	run cmp stdin.plan dash.plan
	assert_success
}

@test "plan accepts a zstd-compressed model, recognised by its magic not its name" {
	amp-plan "$TINY" >plain.plan
	zstd -q -c "$TINY" >compressed.yaml
	run --separate-stderr amp-plan -o from-file.plan compressed.yaml
	assert_success
	run same_but_provenance plain.plan from-file.plan
	assert_success
	amp-plan <compressed.yaml >from-stdin.plan
	run same_but_provenance plain.plan from-stdin.plan
	assert_success
}

@test "plan rejects a zstd model that ends mid-frame" {
	zstd -q -c "$TINY" >full.zst
	head -c 100 full.zst >cut.zst
	run --separate-stderr amp-plan -o out.plan cut.zst
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == "amp-plan: "*"'cut.zst'"*"truncated"* ]] || fail "$stderr"
	[[ ! -e out.plan ]] || fail "out.plan was written on failure"
}

@test "plan reports a model file that does not exist" {
	run --separate-stderr amp-plan missing.yaml
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-plan: cannot open 'missing.yaml': No such file or directory"
}

@test "plan names a bad model on standard input as <stdin> with line and column" {
	run --separate-stderr amp-plan <"$BAD/model-unknown-op.yaml"
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == "amp-plan: <stdin>:7:10: unknown op 'softmax'"* ]] || fail "$stderr"
}

# ---- output ----

@test "plan -z output starts with the zstd magic and decompresses to the plain plan" {
	amp-plan "$TINY" >plain.plan
	amp-plan -z "$TINY" >stdout.zst
	amp-plan -z -o file.zst "$TINY"
	run od -An -tx1 -N4 stdout.zst
	assert_output ' 28 b5 2f fd'
	run od -An -tx1 -N4 file.zst
	assert_output ' 28 b5 2f fd'
	zstd -q -dc stdout.zst >stdout.plan
	zstd -q -dc file.zst >file.plan
	run cmp plain.plan stdout.plan
	assert_success
	run cmp plain.plan file.plan
	assert_success
}

@test "plan -o writes the same bytes as stdout and leaves no temporary" {
	amp-plan "$TINY" >stdout.plan
	run --separate-stderr amp-plan -o out.plan "$TINY"
	assert_success
	assert_equal "$output" ""
	assert_equal "$stderr" ""
	run cmp stdout.plan out.plan
	assert_success
	run find . -name '*.tmp.*'
	assert_output ""
}

@test "plan -o replaces an existing target by rename, not by rewriting it" {
	echo old >out.plan
	ln out.plan link.plan
	run amp-plan -o out.plan "$TINY"
	assert_success
	run head -n 1 out.plan
	assert_output 'format: amp-plan'
	# The old inode is untouched: the new plan was renamed over the name.
	run cat link.plan
	assert_output 'old'
}

@test "plan -o onto a FIFO writes into it in place, leaving the FIFO a FIFO" {
	amp-plan "$TINY" >stdout.plan
	mkfifo pipe
	cat pipe >got.plan &
	run --separate-stderr amp-plan -o pipe "$TINY"
	assert_success
	wait
	run cmp stdout.plan got.plan
	assert_success
	assert [ -p pipe ]
	run find . -name '*.tmp.*'
	assert_output ""
}

@test "plan -o onto a character device writes to the device, never replacing it with a file" {
	[ "$(id -u)" = 0 ] || skip "mknod needs root"
	mknod null c 1 3 || skip "mknod not permitted here"
	run --separate-stderr amp-plan -o null "$TINY"
	assert_success
	assert [ -c null ]
	run stat -c %s null
	assert_output 0
	run --separate-stderr amp-plan -z -o null "$TINY"
	assert_success
	assert [ -c null ]
}

@test "plan gives byte-identical files for the same input twice" {
	amp-plan -o a.plan "$SIGLIP"
	amp-plan -o b.plan "$SIGLIP"
	amp-plan -o c.plan "$TINY"
	amp-plan -o d.plan "$TINY"
	[[ -s a.plan && -s c.plan ]] || fail "no plan written"
	run cmp a.plan b.plan
	assert_success
	run cmp c.plan d.plan
	assert_success
}

@test "plan -o on bad input leaves neither the target nor a temporary" {
	rejects "$BAD/model-unknown-op.yaml" 7:10 "unknown op 'softmax'" \
		"$BAD/model-unknown-op.yaml"
	run find . -mindepth 1 ! -name 'separate-stderr-*'
	assert_output ""
}

@test "plan -o on bad input leaves an existing target untouched" {
	printf 'previous plan\n' >out.plan
	run --separate-stderr amp-plan -o out.plan "$BAD/model-matmul-inner-differ.yaml"
	assert_failure 1
	run cat out.plan
	assert_output 'previous plan'
	run find . -name '*.tmp.*'
	assert_output ""
}

@test "plan -o onto a directory fails with exit 1 and removes its temporary" {
	mkdir out
	run --separate-stderr amp-plan -o out "$TINY"
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == "amp-plan: "*"'out'"* ]] || fail "$stderr"
	run find . -name '*.tmp.*'
	assert_output ""
	run ls -A out
	assert_output ""
}

@test "plan -o into a missing directory fails with exit 1 naming the file" {
	run --separate-stderr amp-plan -o nowhere/out.plan "$TINY"
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == "amp-plan: cannot create 'nowhere/out.plan': "* ]] || fail "$stderr"
}
