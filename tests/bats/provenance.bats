#!/usr/bin/env bats
# Provenance (formats/stage.md): every stage file and capture records the
# tools that made it, in order, with their version and options as given,
# and the model, machine and scales files by base name and FNV-1a digest.

load common
bats_require_minimum_version 1.5.0

TINY=$MODELS/tiny-mlp.yaml

# prov FILE: the provenance records of stage FILE, one per line.
prov() {
	awk '/^provenance:/ { on = 1; next } on && /^- / { print; next } on { exit }' "$1"
}

# chain DIR [PLAN_FLAGS...]: tiny-mlp through amp-group into DIR, each
# stage from the previous file; amp-group with --weights direct.
chain() {
	local d=$1
	shift
	mkdir -p "$d"
	amp-plan "$@" -o "$d/plan.yaml" "$TINY" && amp-compose -o "$d/composed.yaml" "$d/plan.yaml" &&
		amp-expand -z -o "$d/expanded.yaml.zst" "$d/composed.yaml" &&
		amp-exchange -o "$d/exchange.yaml" "$d/expanded.yaml.zst" &&
		amp-group --weights direct -o "$d/grouped.yaml" "$d/exchange.yaml"
}

@test "each stage appends its tool's record to its input's: name, version, options as given" {
	run chain a --objective cycles --machine "$MACHINES/amp1472.yaml"
	assert_success
	run prov a/grouped.yaml
	assert_equal "${#lines[@]}" 5
	local version
	version=$(amp-plan --version | awk '{ print $NF }')
	assert_regex "${lines[0]}" "^- \{tool: amp-plan, version: $(re_quote "$version"), options: --objective cycles --machine amp1472.yaml, files: "
	assert_equal "${lines[1]}" "- {tool: amp-compose, version: $version, options: '', files: []}"
	assert_equal "${lines[2]}" "- {tool: amp-expand, version: $version, options: '', files: []}"
	assert_equal "${lines[3]}" "- {tool: amp-exchange, version: $version, options: '', files: []}"
	assert_equal "${lines[4]}" "- {tool: amp-group, version: $version, options: --weights direct, files: []}"
	# every earlier stage holds the records before it, unchanged
	run prov a/exchange.yaml
	assert_equal "${#lines[@]}" 4
	assert_equal "$(prov a/exchange.yaml)" "$(prov a/grouped.yaml | head -n 4)"
}

@test "amp-plan records the model, the machine and the scales by base name and content digest, from a file or a pipe" {
	printf 'amp-scales: 1\nscales:\n  w_up: -2\n  w_down: 1\n' > s.yaml
	run amp-plan --scales "$BATS_TEST_TMPDIR/s.yaml" -o p.yaml "$TINY"
	assert_success
	local rec
	rec=$(prov p.yaml)
	# the digests, computed here byte by byte (FNV-1a, 64 bits, in 32-bit
	# halves: h * 0x100000001b3 = h * 0x1b3 + h << 40)
	fnv() {
		perl -e 'local $/; my $d = <STDIN>; my ($hi, $lo) = (0xcbf29ce4, 0x84222325);
			for my $c (unpack("C*", $d)) { $lo ^= $c; my $p = $lo * 0x1b3;
				$hi = ($hi * 0x1b3 + int($p / 4294967296) + (($lo << 8) % 4294967296)) % 4294967296;
				$lo = $p % 4294967296; }
			printf("%08x%08x\n", $hi, $lo);' < "$1"
	}
	command -v perl >/dev/null || skip "perl is needed to compute the digests independently"
	local m c s
	m=$(fnv "$TINY") c=$(fnv "$MACHINES/amp1472.yaml") s=$(fnv s.yaml)
	assert_equal "$rec" "- {tool: amp-plan, version: $(amp-plan --version | awk '{ print $NF }'), options: --scales s.yaml, files: [{role: model, name: tiny-mlp.yaml, fnv1a: $m}, {role: machine, name: amp1472.yaml, fnv1a: $c}, {role: scales, name: s.yaml, fnv1a: $s}]}"
	# from a pipe: the same digest, named <stdin>
	run bash -c "amp-plan < '$TINY' | head -n 6 | tail -n 1"
	assert_success
	assert_output "- {tool: amp-plan, version: $(amp-plan --version | awk '{ print $NF }'), options: '', files: [{role: model, name: <stdin>, fnv1a: $m}, {role: machine, name: amp1472.yaml, fnv1a: $c}]}"
	# one changed byte of the model changes its digest and nothing else of the record
	sed 's/^name: tiny-mlp$/name: tiny-mlx/' "$TINY" > tiny-mlx.yaml
	run amp-plan -o q.yaml tiny-mlx.yaml
	assert_success
	[[ $(prov q.yaml) == *"name: tiny-mlx.yaml, fnv1a: $(fnv tiny-mlx.yaml)}"* ]] || fail "$(prov q.yaml)"
	[ "$(fnv tiny-mlx.yaml)" != "$m" ] || fail "the digest did not change"
}

@test "provenance names no directory, and the same inputs give the same bytes from any directory" {
	run chain a
	assert_success
	mkdir -p elsewhere/deeper
	cp "$TINY" elsewhere/deeper/
	(cd elsewhere && amp-plan --machine "$MACHINES/amp1472.yaml" -o "$BATS_TEST_TMPDIR/b.yaml" deeper/tiny-mlp.yaml)
	run prov b.yaml
	[[ $output != *"/"* ]] || fail "a path in: $output"
	# nor when a file argument shares its option's word, nor from -o, -z
	# and --explain, which leave no trace
	printf 'amp-scales: 1\nscales:\n  w_up: -2\n' > s.yaml
	amp-plan -m"$MACHINES/amp1472.yaml" --scales="$BATS_TEST_TMPDIR/s.yaml" --explain=2 -z \
		-o"$BATS_TEST_TMPDIR/e.yaml" "$TINY" > /dev/null
	zstd -dcq e.yaml > e.plain
	run prov e.plain
	assert_regex "$output" "^- \{tool: amp-plan, version: [^,]*, options: -mamp1472.yaml --scales=s.yaml, files: "
	amp-plan -o c.yaml "$TINY"
	amp-plan -o d.yaml "$TINY"
	cmp c.yaml d.yaml
	cmp c.yaml a/plan.yaml
}

@test "amp-emit's program and amp-capture's capture carry the records, each tool's own last" {
	run chain a
	assert_success
	run amp-emit --model "$TINY" -o a/p.amp a/grouped.yaml
	assert_success
	run amp-capture --table-budget 40000 -o a/c.json a/p.amp
	assert_success
	run jq -r '.provenance[] | "\(.tool) \(.options) \(.files | map(.role + ":" + .name) | join(","))"' a/c.json
	assert_success
	assert_equal "${#lines[@]}" 7
	assert_equal "${lines[0]}" "amp-plan  model:tiny-mlp.yaml,machine:amp1472.yaml"
	assert_equal "${lines[4]}" "amp-group --weights direct "
	assert_equal "${lines[5]}" "amp-emit --model tiny-mlp.yaml model:tiny-mlp.yaml"
	assert_equal "${lines[6]}" "amp-capture --table-budget 40000 "
	# the model's digest agrees between amp-plan's record and amp-emit's
	run jq -r '[.provenance[] | .files[] | select(.role == "model") | .fnv1a] | unique | length' a/c.json
	assert_output 1
	# from the grouped stage the capture has no amp-emit record
	run amp-capture a/grouped.yaml
	assert_success
	[[ $output != *'"amp-emit"'* ]] || fail "an amp-emit record without a program"
}

@test "a version 4 stage, without provenance, is still read and written as version 7" {
	run chain a
	assert_success
	awk '/^version: 17$/ { print "version: 4"; next } /^provenance:/ { skip = 1; next }
		skip && /^- / { next } { skip = 0; print }' a/plan.yaml > v4.yaml
	run amp-compose -o c.yaml v4.yaml
	assert_success
	run prov c.yaml
	assert_equal "${#lines[@]}" 1
	assert_regex "${lines[0]}" '^- \{tool: amp-compose, '
	# everything but the provenance is what the version 7 plan gives
	diff <(grep -v '^- {tool: ' c.yaml | sed 1,5d) <(grep -v '^- {tool: ' a/composed.yaml | sed 1,5d)
	assert_equal "$(sed -n 2p c.yaml)" "version: 17"
}

@test "a capture of version 3, without provenance, is still compared" {
	run chain a
	assert_success
	amp-capture -o new.json a/grouped.yaml
	jq 'del(.provenance, .summary.exchange_floor_cycles, .summary.exchange_floor_ratio, .summary.plan_floor, .summary.bound,
		.summary.microseconds, .summary.throughput, .machine.clock_hz, .machine.clock_source,
		.phases[].floor_cycles, .phases[].floor_tile, .phases[].floor_ratio) | .version = 3' new.json > old.json
	run amp-compare old.json new.json
	assert_success
	[[ $output == *"total_cycles"* ]] || fail "$output"
}

@test "a malformed provenance record is rejected at its file:line:col" {
	run chain a
	assert_success
	sed 's/fnv1a: \([0-9a-f]*\)}/fnv1a: 12x}/' a/plan.yaml > bad-digest.yaml
	run --separate-stderr amp-compose -o out.yaml bad-digest.yaml
	assert_failure 1
	assert_regex "$stderr" "^amp-compose: bad-digest.yaml:6:[0-9]+: expected 16 hexadecimal digits, found '12x'$"
	[ ! -e out.yaml ] || fail "output written"
	sed 's/^- {tool: amp-plan, /- {tool: amp-plan, colour: red, /' a/plan.yaml > bad-key.yaml
	run --separate-stderr amp-compose bad-key.yaml
	assert_failure 1
	assert_regex "$stderr" "^amp-compose: bad-key.yaml:6:[0-9]+: unknown key 'colour'"
	for f in plan-provenance-digest plan-provenance-files; do
		run --separate-stderr amp-compose "$BAD/$f.yaml"
		assert_failure 1
		assert_regex "$stderr" "^amp-compose: $(re_quote "$BAD/$f.yaml"):7:[0-9]+: "
	done
}

@test "the model and scales given with a stage must be the files amp-plan planned from, by the provenance's hash" {
	local G=$ROOT/tests/golden/tiny-mlp/grouped.yaml
	amp-emit --model "$MODELS/tiny-mlp.yaml" -o good.amp "$G"
	# a model with one edit: amp-emit and amp-run --model refuse it
	sed 's/eps: 1e-6/eps: 1e-5/' "$MODELS/tiny-mlp.yaml" >edited.yaml
	run --separate-stderr amp-emit --model edited.yaml -o bad.amp "$G"
	assert_failure 1
	[[ $stderr == "amp-emit: '$G': model file 'edited.yaml' (fnv1a "*") is not the one the stage was planned from ('tiny-mlp.yaml', fnv1a 42da0e4b0878909c)" ]] ||
		fail "$stderr"
	[ ! -e bad.amp ]
	run --separate-stderr amp-run --model edited.yaml good.amp
	assert_failure 1
	[[ $stderr == "amp-run: 'good.amp': model file 'edited.yaml' "*"is not the one the stage was planned from"* ]] || fail "$stderr"
	# an embedded model with its wiring edited and its own hash right
	run --separate-stderr amp-run "$BAD/program-model-wiring.amp"
	assert_failure 1
	[[ $stderr == *"model file '<embedded MODEL>' (fnv1a "*") is not the one the stage was planned from ('tiny-mlp.yaml', "* ]] ||
		fail "$stderr"
	# scales for a stage planned without them
	printf 'amp-scales: 1\nscales: {}\n' >s.yaml
	run --separate-stderr amp-emit --model "$MODELS/tiny-mlp.yaml" --scales s.yaml -o bad.amp "$G"
	assert_failure 1
	[[ $stderr == *"the stage was planned without a scales file; 's.yaml' (fnv1a "*") is not its scales" ]] || fail "$stderr"
	# the planned model runs
	run amp-run good.amp
	assert_success
}
