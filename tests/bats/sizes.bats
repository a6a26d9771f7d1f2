#!/usr/bin/env bats
# Sizes fail fast: a shape, a loop or a compressed section that no machine
# could hold is refused with the bound it breaks, exit 1, before anything
# is allocated for it. Each case runs under a 1 GiB address-space limit
# (not under the sanitizers), so an allocation of its size would abort
# instead of passing, and under a timeout, so a search that does not end
# fails instead of hanging.

load common
bats_require_minimum_version 1.5.0

TINY=$MODELS/tiny-mlp.yaml
G=$ROOT/tests/golden/tiny-mlp/grouped.yaml

# small CMD...: CMD with 1 GiB of address space and 20 seconds (under the
# sanitizers, whose shadow memory needs terabytes of address space, the
# timeout alone: the release build's run holds the memory bound)
small() {
	if [ -n "${AMP_SAN:-}" ]; then
		run --separate-stderr timeout 20 "$@"
	else
		run --separate-stderr bash -c 'ulimit -v 1048576; exec timeout 20 "$@"' _ "$@"
	fi
}

# shaped SHAPE: tiny-mlp with input x of SHAPE, as big.yaml
shaped() {
	sed "s/shape: \[2, 37, 80\]/shape: [$1]/" "$TINY" >big.yaml
	grep -q "shape: \[$1\]" big.yaml || fail "x not reshaped"
}

@test "a model the machine cannot hold is refused by amp-plan and amp-run --calibrate, naming the op and the bound" {
	local s
	for s in "1000000000, 37, 80" "2, 1000000000, 80" "2, 1000000, 80"; do
		shaped "$s"
		for cmd in "amp-plan -o out.yaml" "amp-run --calibrate"; do
			# shellcheck disable=SC2086
			if [[ $cmd == amp-run* ]]; then small amp-run --calibrate big.yaml -o out.yaml; else small $cmd big.yaml; fi
			[ "$status" = 1 ] || fail "$cmd [$s]: exit $status: $stderr"
			[[ $stderr =~ ^amp-(plan|run):\ big\.yaml:17:5:\ op\ \'act\'\ cannot\ be\ held\ by\ machine\ \'amp1472\':\ its\ operands\ and\ result,\ live\ at\ once,\ are\ at\ least\ [0-9]+\ bytes\ .*and\ the\ machine\ holds\ 864005120\ \(864\.0\ MB:\ 1472\ tiles\ x\ 586960\ bytes\ available\)\.\ Next:\ plan\ a\ smaller\ batch,\ or\ use\ a\ machine\ file\ with\ more\ tiles\ .*$ ]] ||
				fail "$cmd [$s]: $stderr"
			[ ! -e out.yaml ] || fail "$cmd [$s] wrote out.yaml"
		done
	done
	# the bound is the operands and result of one op: gelu's fp16 input and
	# output of [B, 37, 200], 37 * 200 * 2 * 2 bytes a batch row
	shaped "1000000000, 37, 80"
	small amp-plan big.yaml
	[[ $stderr == *"are at least $((1000000000 * 37 * 200 * 2 * 2)) bytes"* ]] || fail "$stderr"
}

@test "a shape of more than 2^48 elements is refused by the model reader at the shape" {
	shaped "4294967296, 4294967296, 80"
	small amp-plan big.yaml
	assert_failure 1
	assert_equal "$stderr" "amp-plan: big.yaml:6:14: tensor 'x' has more than 9223372036854775807 elements; at most 2^48 are supported (no machine holds more)"
	shaped "65536, 65536, 65537"
	small amp-run --calibrate big.yaml -o s.yaml
	assert_failure 1
	[[ $stderr == *"tensor 'x' has 281479271677952 elements; at most 2^48"* ]] || fail "$stderr"
	# under the bound the reader accepts the shape, and the machine refuses it
	shaped "65536, 65536, 80"
	small amp-plan big.yaml
	assert_failure 1
	[[ $stderr == *"cannot be held by machine 'amp1472'"* ]] || fail "$stderr"
}

@test "a stage whose loop writes more than the machine holds is refused by amp-emit and amp-capture" {
	awk '!done && / kind: send, .*loops: \[\]/ { sub(/loops: \[\]/, "loops: [[1000000000, 0, 0, 0, 0]]"); done = 1 } { print }' \
		"$G" >loop.yaml
	grep -q 'loops: \[\[1000000000, 0, 0, 0, 0\]\]' loop.yaml || fail "no loop added"
	local t
	for t in amp-emit amp-capture; do
		local no_model=()
		[ "$t" = amp-capture ] || no_model=(--no-model)
		small "$t" "${no_model[@]}" -o out loop.yaml
		assert_failure 1
		[[ $stderr =~ ^$t:\ loop\.yaml:[0-9]+:[0-9]+:\ 1000000000\ members\ of\ 16\ bytes\ to\ each\ receiver\ write\ more\ than\ the\ machine\'s\ SRAM\ holds\ \(1472\ tiles\ x\ 638976\ bytes\)$ ]] ||
			fail "$t: $stderr"
		[ ! -e out ] || fail "$t wrote out"
	done
	# a send family of more fragments than every tile may send
	awk '!done && / kind: send, len: 16, .*loops: \[\]/ { sub(/recv: \[[0-9]+, -?[0-9]+\]/, "recv: [1, 0]"); sub(/loops: \[\]/, "loops: [[30000000, 0, 0, 0, 0]]"); done = 1 } { print }' \
		"$G" >frags.yaml
	grep -q 'loops: \[\[30000000, 0, 0, 0, 0\]\]' frags.yaml || fail "no loop added"
	small amp-capture frags.yaml
	assert_failure 1
	[[ $stderr == *"30000000 members, each a send fragment, are more than the machine's tiles send (1472 tiles x fragment_limit 16384)" ]] ||
		fail "$stderr"
}

@test "a program whose zstd section decodes past the machine's SRAM is refused before it is decoded" {
	local t
	for t in amp-run amp-capture "amp-emit --list"; do
		# shellcheck disable=SC2086
		small $t "$BAD/program-rows-3g.amp"
		assert_failure 1
		assert_equal "$output" ""
		assert_equal "$stderr" "${t%% *}: '$BAD/program-rows-3g.amp': the ROWS section decodes to 3221225472 bytes, more than the machine's SRAM holds (tiles x sram_bytes of the STAGE's machine: 940572672)"
	done
}

@test "parameters that no machine holds are refused before planning, though every op alone fits" {
	# 450 matmuls of [1, 16, 1024] by their own [1024, 1024] fp16 weight:
	# 2 MiB an op, 943718400 bytes of parameters, over 864005120
	{
		printf 'amp-model: 1\nname: params\ninputs:\n  x0: {shape: [1, 16, 1024], dtype: fp16}\nparams:\n'
		for i in $(seq 0 449); do printf '  w%d: {shape: [1024, 1024], dtype: fp16}\n' "$i"; done
		printf 'ops:\n'
		for i in $(seq 0 449); do printf '  - {op: matmul, name: mm%d, a: x%d, b: w%d, out: x%d}\n' "$i" "$i" "$i" $((i + 1)); done
		printf 'outputs: [x450]\n'
	} > params.yaml
	small amp-plan -o out.yaml params.yaml
	assert_failure 1
	[[ $stderr == "amp-plan: params.yaml:6:3: model 'params': parameters need 943718400 bytes; 1472 tiles hold at most 864005120 "* ]] ||
		fail "$stderr"
	[ ! -e out.yaml ] || fail "out.yaml written"
	# calibration reads no machine's plan, but is held to the same bound
	# before it makes 943 MB of parameters
	small amp-run --calibrate params.yaml -o s.yaml
	assert_failure 1
	[[ $stderr == "amp-run: params.yaml:6:3: model 'params': parameters need 943718400 bytes; "* ]] || fail "$stderr"
	[ ! -e s.yaml ] || fail "s.yaml written"
}
