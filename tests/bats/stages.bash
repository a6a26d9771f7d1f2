# Loaded by the lowering suites (after common): helpers on stage files.

# members STAGE: one line per member of every transfer family (xfer.h):
# "step kind len src_tile src_addr dst_tile dst_addr nrecv recv_step",
# tiles reduced modulo the stage's machine tiles.
members() {
	awk '
	/^machine: / { s = $0; sub(/.* tiles: /, "", s); sub(/,.*/, "", s); tiles = s + 0 }
	/^- \{step: [0-9]+, kind: / {
		s = $0; gsub(/[][{},:]/, " ", s); n = split(s, f, " ")
		st = sa = 0; nr = 1; rs = 0; nl = 0
		for (i = 2; i <= n; i++) {
			if (f[i] == "step") step = f[++i]
			else if (f[i] == "kind") kind = f[++i]
			else if (f[i] == "len") len = f[++i]
			else if (f[i] == "src") { st = f[++i]; sa = f[++i] }
			else if (f[i] == "dst") { dt = f[++i]; da = f[++i] }
			else if (f[i] == "recv") { nr = f[++i]; rs = f[++i] }
			else if (f[i] == "loops")
				for (i++; i + 4 <= n; i += 5) {
					c[nl] = f[i]; lst[nl] = f[i+1]; lsa[nl] = f[i+2]
					ldt[nl] = f[i+3]; lda[nl] = f[i+4]; nl++
				}
		}
		total = 1
		for (k = 0; k < nl; k++) total *= c[k]
		for (m = 0; m < total; m++) {
			r = m; mst = st; msa = sa; mdt = dt; mda = da
			for (k = 0; k < nl; k++) {
				ix = r % c[k]; r = int(r / c[k])
				mst += ix * lst[k]; msa += ix * lsa[k]; mdt += ix * ldt[k]; mda += ix * lda[k]
			}
			mst = (mst % tiles + tiles) % tiles; mdt = (mdt % tiles + tiles) % tiles
			print step, kind, len, mst, msa, mdt, mda, nr, rs
		}
	}' "$1"
}

# grouped MODEL OUT [MACHINE]: MODEL planned (for MACHINE), composed,
# expanded, exchanged and grouped.
grouped() {
	local machine=${3:-$MACHINES/amp1472.yaml}
	amp-plan --objective capacity --machine "$machine" "$1" -o "$2.plan" &&
		amp-compose "$2.plan" -o "$2.composed" &&
		amp-expand "$2.composed" -o "$2.expanded" &&
		amp-exchange "$2.expanded" -o "$2.exchange" &&
		amp-group "$2.exchange" -o "$2" || return 1
	rm -f "$2.plan" "$2.composed" "$2.expanded" "$2.exchange"
	[ -s "$2" ]
}

# reads_path_dash_stdin TOOL IN EXPECT: TOOL gives EXPECT's bytes whether
# IN is a path, '-' or standard input, and says nothing on stderr.
reads_path_dash_stdin() {
	local tool=$1 in=$2 expect=$3
	run "$tool" - -o dash.yaml < "$in"
	assert_success
	run "$tool" -o none.yaml < "$in"
	assert_success
	run --separate-stderr "$tool" "$in"
	assert_success
	assert_equal "$stderr" ""
	printf '%s\n' "$output" > stdout.yaml
	run cmp "$expect" dash.yaml
	assert_success
	run cmp "$expect" none.yaml
	assert_success
	run cmp "$expect" stdout.yaml
	assert_success
}

# reads_zstd_by_magic TOOL IN EXPECT: TOOL reads IN compressed with zstd,
# named .zst, named like plain YAML, and on standard input, giving EXPECT.
reads_zstd_by_magic() {
	local tool=$1 in=$2 expect=$3
	run zstd -q "$in" -o in.yaml.zst
	assert_success
	run zstd -q "$in" -o packed.yaml
	assert_success
	run od -An -tx1 -N4 packed.yaml
	assert_output ' 28 b5 2f fd'
	run "$tool" in.yaml.zst -o from-zst.yaml
	assert_success
	run "$tool" packed.yaml -o from-yaml-name.yaml
	assert_success
	run "$tool" -o from-stdin.yaml < packed.yaml
	assert_success
	run cmp "$expect" from-zst.yaml
	assert_success
	run cmp "$expect" from-yaml-name.yaml
	assert_success
	run cmp "$expect" from-stdin.yaml
	assert_success
}

# step_of STAGE OP OPERAND: the copy step moving OP's OPERAND.
step_of() {
	sed -n "s/^- {step: \([0-9]*\), copy: [a-z]*, op: $2, operand: $3, .*/\1/p" "$1"
}

# phase_of STAGE STEP: the phase holding STEP.
phase_of() {
	awk -v s="$2" '/^- \{phase: / {
		t = $0; gsub(/[][{},:]/, " ", t); split(t, f, " ")
		if (f[5] <= s + 0 && s + 0 <= f[6]) print f[3] }' "$1"
}

# dst_tensor STAGE STEP: the tensor copy step STEP writes.
dst_tensor() {
	sed -n "s/^- {step: $2, copy: .*, dst: \([^@]*\)@.*/\1/p" "$1"
}

# field FILE OFFSET BYTES: the little-endian unsigned integer there.
field() {
	local v
	v=$(od -An -tu"$3" -j"$2" -N"$3" "$1") || return 1
	echo $((v))
}
