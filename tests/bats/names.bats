#!/usr/bin/env bats
# Names of any length (up to formats/model.md's 256 bytes) and any UTF-8:
# every tool builds the names it makes from them with measured lengths,
# so none is cut, none aliases another and no loop waits for a unique
# one; the model reader refuses the names it cannot take at file:line:col.

bats_require_minimum_version 1.5.0
load common
load amp-run

# mlp FILE OP1 OP2 T1 T2: tiny-mlp's shapes, its layernorm named OP1, its
# first matmul OP2, their results T1 and T2 (every name double-quoted).
mlp() {
	cat >"$1" <<EOF
amp-model: 1
name: names
inputs:
  x: {shape: [2, 37, 80], dtype: fp16}
params:
  ln_s: {shape: [80], dtype: fp16}
  ln_b: {shape: [80], dtype: fp16}
  w_up: {shape: [80, 200], dtype: fp8}
  b_up: {shape: [200], dtype: fp16}
  w_down: {shape: [200, 80], dtype: fp8}
  b_down: {shape: [80], dtype: fp16}
ops:
  - {op: layernorm, name: "$2", x: x, scale: ln_s, bias: ln_b, eps: 1e-6, out: "$4"}
  - {op: matmul, name: "$3", a: "$4", b: w_up, bias: b_up, out: "$5"}
  - {op: gelu, name: act, x: "$5", out: g}
  - {op: matmul, name: mlp_down, a: g, b: w_down, bias: b_down, out: y}
  - {op: add, name: residual, a: x, b: y, out: z}
outputs: [z]
EOF
}

# rep S N: S repeated N times.
rep() {
	local s= i
	for ((i = 0; i < $2; i++)); do s+=$1; done
	printf '%s' "$s"
}

# runs MODEL: planned, lowered, emitted with the model and run: byte-exact
# movement, every op within its tolerance, z's cosine at least 0.99. Each
# tool has a time limit: a name cut short once made the planner spin.
runs() {
	timeout 120 amp-plan "$1" -o r.plan && timeout 60 amp-compose r.plan -o r.c &&
		timeout 60 amp-expand r.c -o r.e && timeout 60 amp-exchange r.e -o r.x &&
		timeout 60 amp-group r.x -o r.g && timeout 60 amp-emit --model "$1" r.g -o prog.amp ||
		fail "the pipeline failed on $1"
	passes prog.amp
}

@test "names of 80 and 128 'Ü' (a matmul's and a layernorm's) plan, lower and run byte-exact" {
	mlp m.yaml "$(rep Ü 128)" "$(rep Ü 80)" xn h
	# amp-plan aborted ("double free") and amp-exchange spun when the
	# names they made from such names were cut at 160 and 256 bytes
	timeout 120 amp-plan m.yaml -o m.plan
	timeout 60 amp-compose m.plan | timeout 60 amp-expand | timeout 60 amp-exchange >m.x
	runs m.yaml
	# the names the tools made are whole: the layernorm's label, UTF-8 uncut
	run grep -c "label: $(rep Ü 128)\.[a-z]*}" m.x
	assert [ "$output" -ge 1 ]
	# 130 'Ü' (260 bytes) are past the limit: refused where they stand
	mlp m.yaml "$(rep Ü 130)" mlp_up xn h
	plan_rejects m.yaml 13:27 "op name of 260 bytes: a name has 1 to 256" m.yaml
}

@test "two tensors whose names share their first 255 bytes keep their own casts and readers" {
	local a
	a=$(rep a 255)
	mlp m.yaml ln mlp_up "${a}1" "${a}2"
	runs m.yaml
	amp-plan m.yaml -o m.plan
	run grep -c "name: ${a}1.fp8," m.plan
	assert_output 1
}

@test "names of 1 to 256 bytes of random UTF-8 (1- to 4-byte characters) run byte-exact" {
	local chars=(a Z 0 _ - é Ü ß € 日 本 😀 🂡) k n name names=()
	for k in 1 2 3 4; do
		name=
		n=$((RANDOM % 256 + 1))
		while :; do
			c=${chars[RANDOM % ${#chars[@]}]}
			[ $(($(printf '%s' "$name$c" | wc -c))) -le "$n" ] || break
			name+=$c
		done
		[ -n "$name" ] || name=q
		names+=("$name")
	done
	mlp m.yaml "${names[0]}" "${names[1]}" "t${names[2]}" "u${names[3]}"
	runs m.yaml
}

@test "plan refuses names of 257 to 1,024 bytes of random UTF-8 at their line and column" {
	local chars=(a Z 0 _ - é Ü ß € 日 本 😀 🂡) k n b name
	for k in 1 2 3 4 5 6; do
		name=
		n=$((RANDOM % 768 + 257))       # the bytes: random characters, then 'a' up to n exactly
		while [ "$(printf '%s' "$name" | wc -c)" -le $((n - 4)) ]; do
			name+=${chars[RANDOM % ${#chars[@]}]}
		done
		while [ "$(printf '%s' "$name" | wc -c)" -lt "$n" ]; do name+=a; done
		b=$(printf '%s' "$name" | wc -c)
		[ "$b" = "$n" ] || fail "a name of $b bytes, not $n"
		if ((k % 2)); then      # the layernorm's result, a tensor
			mlp m.yaml ln mlp_up "$name" h
			plan_rejects m.yaml 13:80 "tensor name of $b bytes: a name has 1 to 256" m.yaml
		else                    # the layernorm, an op
			mlp m.yaml "$name" mlp_up xn h
			plan_rejects m.yaml '13:[0-9]+' "name of $b bytes" m.yaml
		fi
	done
}

@test "plan refuses a tensor name of 257 bytes at its line and column" {
	mlp m.yaml ln mlp_up "$(rep a 257)" h
	plan_rejects m.yaml 13:80 "tensor name of 257 bytes: a name has 1 to 256" m.yaml
}

@test "plan refuses an op name of 257 bytes and a map name its ops' names would take past 256" {
	mlp m.yaml "$(rep é 128)b" mlp_up xn h
	plan_rejects m.yaml 13:27 "op name of 257 bytes" m.yaml
	mlp m2.yaml ln mlp_up xn h
	sed 's/^  - {op: gelu.*/  - {op: map, name: "'"$(rep m 251)"'", x: h, probe: p, heads: 2, wq: w, bq: b, wkv: w, bkv: b, wo: w, bo: b, scale: s, bias: b, w1: w, b1: b, w2: w, b2: b, out: g}/; s/^amp-model: 1/amp-model: 2/' m2.yaml >map.yaml
	plan_rejects map.yaml 15:21 "map name of 251 bytes" map.yaml
}

@test "plan refuses '@' in a name and a tensor name ending in a suffix amp gives its own tensors" {
	mlp m.yaml ln mlp_up "x@n" h
	plan_rejects m.yaml 13:80 "holds '@'" m.yaml
	mlp m.yaml "l@n" mlp_up xn h
	plan_rejects m.yaml 13:27 "holds '@'" m.yaml
	for s in fp8 fp16 fp32 int32 partial sumsq; do
		mlp m.yaml ln mlp_up xn "h.$s"
		plan_rejects m.yaml 14:69 "tensor name 'h.$s' ends in '.$s'" m.yaml
	done
}

@test "plan refuses '/' in a tensor name: it is a file's name for amp-run --data and --save" {
	mlp m.yaml ln mlp_up "../xn" h
	plan_rejects m.yaml 13:80 "tensor name '../xn' holds '/'" m.yaml
}

@test "amp-run never reads or writes outside --data DIR and --save DIR, whatever a stage's names" {
	# a stage (not the model reader's) whose output and input are named
	# ../z and ../x: --save refuses to write ../z.npy, --data to read ../x.npy
	mlp m.yaml ln mlp_up xn h
	amp-plan m.yaml | amp-compose | amp-expand | amp-exchange | amp-group >g.yaml
	sed 's/\bz\b/..\/z/g' g.yaml >out.yaml
	sed 's/\bx\b/..\/x/g' g.yaml >in.yaml
	grep -q "'../z'\|\.\./z@" out.yaml && grep -q '\.\./x@' in.yaml || fail "the names were not changed"
	amp-emit --no-model out.yaml -o out.amp
	amp-emit --no-model in.yaml -o in.amp
	mkdir -p w/save w/data
	cd w
	run --separate-stderr amp-run --save save ../out.amp
	assert_failure 1
	[[ $stderr == *"--save: tensor '../z' holds '/': its file would not be in save"* ]] || fail "$stderr"
	[ ! -e z.npy ] && [ ! -e z.ref.npy ] || fail "a file was written outside save/"
	touch x.npy
	run --separate-stderr amp-run --data data ../in.amp
	assert_failure 1
	[[ $stderr == *"--data: tensor '../x' holds '/': its file would not be in data"* ]] || fail "$stderr"
}

@test "a trace of names at the 256-byte limit in 2- to 4-byte characters is valid UTF-8 and valid JSON" {
	# amp-capture --trace writes op and phase names into its slices: cut at
	# a byte count, a multibyte character would be split
	mlp m.yaml "$(rep 😀 64)" "$(rep € 85)x" "$(rep Ü 128)" "h$(rep é 127)x"
	amp-plan m.yaml | amp-compose | amp-expand | amp-exchange | amp-group >g.yaml
	amp-capture --trace t.json -o c.json g.yaml
	iconv -f UTF-8 -t UTF-8 t.json >/dev/null || fail "the trace is not valid UTF-8"
	iconv -f UTF-8 -t UTF-8 c.json >/dev/null || fail "the capture is not valid UTF-8"
	jq -e '[.traceEvents[] | .name] | map(select(contains("😀😀😀😀"))) | length > 0' t.json >/dev/null ||
		fail "the layernorm's name is not whole in the trace"
}

@test "the stage readers take a name of 1,024 bytes and refuse one of 1,025 at its line and column" {
	local g=$ROOT/tests/golden/tiny-mlp/plan.yaml n1024 n1025 line col
	n1024=$(printf 'p%.0s' $(seq 1024))
	n1025=${n1024}p
	sed "s/x@canon/$n1024/g" "$g" > ok.yaml
	run --separate-stderr amp-compose ok.yaml -o ok.composed
	assert_success
	grep -q "$n1024" ok.composed || fail "the 1,024-byte placement name was not kept"
	sed "s/x@canon/$n1025/g" "$g" > long.yaml
	line=$(grep -n "^- {name: $n1025," long.yaml | cut -d: -f1)
	col=$(($(grep "^- {name: $n1025," long.yaml | sed 's/\(name: \).*/\1/' | wc -c)))
	run --separate-stderr amp-compose long.yaml -o long.composed
	assert_failure 1
	assert_equal "$stderr" "amp-compose: long.yaml:$line:$col: a name of 1025 bytes, over a stage's limit of 1024"
	[ ! -e long.composed ] || fail "an output was written"
}
