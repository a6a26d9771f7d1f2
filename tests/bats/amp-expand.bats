#!/usr/bin/env bats
# amp-expand: plan -> expanded stage. The command-line contract, what the
# expanded stage adds to the plan (addresses, transfers), and malformed
# plans (tests/bad/expand-*).

load common
load stages
bats_require_minimum_version 1.5.0

# composed MODEL OUT: the composed plan of MODEL.
composed() {
	run amp-plan --objective capacity "$1" -o plan.tmp
	assert_success
	run amp-compose plan.tmp -o "$2"
	assert_success
	assert [ -s "$2" ]
	rm -f plan.tmp
}

# expanded PLAN OUT: amp-expand's stage for PLAN.
expanded() {
	run amp-expand "$1" -o "$2"
	assert_success
	assert [ -s "$2" ]
}


# rejects FILE EXPECTED: amp-expand fails with status 1 and one message
# that starts with the tool name and contains EXPECTED; with -o it writes
# neither the target nor a temporary.
rejects() {
	run --separate-stderr amp-expand "$1"
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^amp-expand: '
	[[ "$stderr" == *"$2"* ]] || fail "expected '$2' in: $stderr"
	mkdir -p out
	run amp-expand "$1" -o out/e.yaml
	assert_failure 1
	run ls -A out
	assert_output ""
}

# ---- A. command-line contract ----

@test "expand --help prints usage and exit statuses to stdout and exits 0" {
	run --separate-stderr amp-expand --help
	assert_success
	assert_line --index 0 --regexp '^Usage: amp-expand '
	assert_output --partial '--output'
	assert_output --partial '--compress'
	assert_output --partial 'Exit status: 0 success, 1 bad input, a limit exceeded (SRAM) or a write'
	assert_equal "$stderr" ""
}

@test "expand --version prints the tool name and version" {
	run --separate-stderr amp-expand --version
	assert_success
	assert_output --regexp '^amp-expand \(amp\) [0-9]+\.[0-9]+\.[0-9]+$'
	assert_equal "$stderr" ""
}

@test "expand rejects an unknown option with usage status 2" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	mkdir out
	run --separate-stderr amp-expand --bogus c.yaml -o out/e.yaml
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-expand: .*'--bogus'"
	assert_regex "$stderr" "Try 'amp-expand --help'"
	run ls -A out
	assert_output ""
}

@test "expand rejects -o without a file with usage status 2" {
	run --separate-stderr amp-expand -o
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "Try 'amp-expand --help'"
}

@test "expand rejects two plan arguments with usage status 2" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	cp c.yaml d.yaml
	run --separate-stderr amp-expand c.yaml d.yaml
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "d\.yaml"
	assert_regex "$stderr" "Try 'amp-expand --help'"
	mkdir out
	run amp-expand c.yaml d.yaml -o out/e.yaml
	assert_failure 2
	run ls -A out
	assert_output ""
}

@test "expand reports a missing plan file with status 1 naming it" {
	run --separate-stderr amp-expand nosuch.yaml
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-expand: cannot open 'nosuch.yaml': No such file or directory"
}

@test "expand reads the same plan from a path, from '-' and from stdin" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	run amp-expand c.yaml -o path.yaml
	assert_success
	assert [ -s path.yaml ]
	reads_path_dash_stdin amp-expand c.yaml path.yaml
}

@test "expand recognises zstd input by its magic, not its name" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	expanded c.yaml expect.yaml
	reads_zstd_by_magic amp-expand c.yaml expect.yaml
}

@test "expand -z writes zstd that decompresses to the plain output" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	expanded c.yaml plain.yaml
	run amp-expand -z c.yaml -o packed.zst
	assert_success
	run od -An -tx1 -N4 packed.zst
	assert_output ' 28 b5 2f fd'
	run cmp -s plain.yaml packed.zst
	assert_failure
	run zstd -q -d packed.zst -o unpacked.yaml
	assert_success
	run cmp plain.yaml unpacked.yaml
	assert_success
	# and the next stage reads the compressed stage as it reads the plain one
	run amp-exchange plain.yaml -o x-plain.yaml
	assert_success
	run amp-exchange packed.zst -o x-packed.yaml
	assert_success
	run cmp x-plain.yaml x-packed.yaml
	assert_success
}

@test "expand -o leaves only the target after success" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	mkdir out
	run --separate-stderr amp-expand c.yaml -o out/e.yaml
	assert_success
	assert_equal "$output" ""
	run ls -A out
	assert_output 'e.yaml'
}

@test "expand -o on failure leaves no target and no temporary" {
	mkdir out
	run amp-expand "$BAD/expand-version.yaml" -o out/e.yaml
	assert_failure 1
	run ls -A out
	assert_output ""
	# a failure after reading (SRAM exhausted) too
	run amp-expand "$BAD/expand-sram.yaml" -o out/e.yaml
	assert_failure 1
	run ls -A out
	assert_output ""
}

@test "expand -o on failure keeps an existing target unchanged" {
	mkdir out
	echo 'previous contents' > out/e.yaml
	run amp-expand "$BAD/expand-block-shape.yaml" -o out/e.yaml
	assert_failure 1
	run amp-expand "$BAD/expand-sram.yaml" -o out/e.yaml
	assert_failure 1
	run cat out/e.yaml
	assert_output 'previous contents'
	run ls -A out
	assert_output 'e.yaml'
}

@test "expand -o into a missing directory fails with status 1 naming the target" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	run --separate-stderr amp-expand c.yaml -o nodir/e.yaml
	assert_failure 1
	assert_regex "$stderr" "^amp-expand: cannot create 'nodir/e\.yaml"
	assert [ ! -e nodir ]
}

@test "expand gives identical bytes for the same input twice" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	expanded c.yaml one.yaml
	expanded c.yaml two.yaml
	run cmp one.yaml two.yaml
	assert_success
	run amp-expand -z c.yaml -o one.zst
	assert_success
	run amp-expand -z c.yaml -o two.zst
	assert_success
	run cmp one.zst two.zst
	assert_success
}

@test "expand writes an amp-expand version 7 header, provenance after it, with the plan's machine and model" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	expanded c.yaml e.yaml
	run sed -n 1,4p e.yaml
	assert_line --index 0 'format: amp-expand'
	assert_line --index 1 'version: 17'
	assert_line --index 2 "$(sed -n 3p c.yaml)"
	assert_line --index 3 'model: tiny-mlp'
	run sed -n 5p e.yaml
	assert_output 'provenance:'
	run sed -n 3p c.yaml
	assert_output --regexp '^machine: \{name: amp1472, tiles: 1472, '
}

# ---- B. content ----

@test "expand gives every placement an address" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	expanded c.yaml e.yaml
	run grep -c '^- {name: [^,]*, tensor: ' c.yaml
	assert_success
	n=$output
	assert [ "$n" -ge 20 ]
	run grep -c ', addr: ' c.yaml
	assert_output 0
	run grep -c '^- {name: [^,]*, tensor: ' e.yaml
	assert_output "$n"
	run grep -c '^- {name: [^,]*, tensor: .*, rstride: \[[0-9, ]*\], addr: [0-9][0-9]*}$' e.yaml
	assert_output "$n"
}

@test "expand starts every placement inside the planned data area (sram_bytes - reserved_bytes)" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	expanded c.yaml e.yaml
	# sram_bytes - reserved_bytes is the planned data; no address starts beyond it
	run awk '
	/^machine: / { s = $0; sub(/.* sram_bytes: /, "", s); sub(/,.*/, "", s); sram = s
	               r = $0; sub(/.* reserved_bytes: /, "", r); sub(/,.*/, "", r); avail = sram - r }
	/ addr: / { a = $0; sub(/.* addr: /, "", a); sub(/}$/, "", a); n++
	            if (a + 0 >= avail) print "placement at " a " beyond " avail }
	END { if (!n) print "no addresses" }' e.yaml
	assert_success
	assert_output ""
}

@test "expand keeps the plan's tensors, gemms, placements and steps" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	expanded c.yaml e.yaml
	sed -e 1d -e 's/, addr: [0-9]*}$/}/' -e '/^transfers:/,$d' e.yaml > e-as-plan.yaml
	sed 1d c.yaml > c-body.yaml
	run same_but_provenance c-body.yaml e-as-plan.yaml
	assert_success
	# and the transfers section follows the steps
	run grep -c '^transfers:$' e.yaml
	assert_output 1
	run tail -n 1 e.yaml
	assert_output --regexp '^- \{step: [0-9]+, kind: (send|local|zero), len: [0-9]+, '
}

@test "expand serves copy steps only, in step order" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	expanded c.yaml e.yaml
	run awk '
	/^- \{step: [0-9]+, copy: / { s = $3; sub(/,/, "", s); copy[s] = 1 }
	/^- \{step: [0-9]+, kind: / { s = $3; sub(/,/, "", s); n++
		if (!(s in copy)) print "transfer on step " s " is not a copy"
		if (s + 0 < last) print "step " s " after step " last
		last = s + 0; served[s] = 1 }
	END { if (n < 10) print "only " n " transfers" }' e.yaml
	assert_success
	assert_output ""
}

@test "expand makes a send only where a receiver is another tile" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	expanded c.yaml e.yaml
	members e.yaml > m.txt
	run grep -c ' send ' m.txt
	assert [ "$output" -ge 100 ]
	run grep -c ' local ' m.txt
	assert [ "$output" -ge 1 ]
	# a send whose one receiver is its sender would be a local copy;
	# a local copy stays on its tile
	run awk '$2 == "send" && $8 == 1 && $4 == $6 { print "send to itself: " $0 }
	         $2 == "local" && $4 != $6 { print "local across tiles: " $0 }' m.txt
	assert_success
	assert_output ""
}

# ---- C. malformed plans ----

@test "expand rejects a stage file of another format" {
	rejects "$BAD/expand-wrong-format.yaml" "expand-wrong-format.yaml:2:9: expected format 'amp-plan', found 'amp-group'"
}

@test "expand rejects a real grouped stage and a real expanded stage" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	expanded c.yaml e.yaml
	run amp-exchange e.yaml -o x.yaml
	assert_success
	run amp-group x.yaml -o g.yaml
	assert_success
	rejects g.yaml "g.yaml:1:9: expected format 'amp-plan', found 'amp-group'"
	rejects e.yaml "e.yaml:1:9: expected format 'amp-plan', found 'amp-expand'"
}

@test "expand rejects a plan of an unsupported version" {
	rejects "$BAD/expand-version.yaml" "expand-version.yaml:3:10: unsupported amp-plan version 18"
}

@test "expand rejects a plan whose placement already has an address" {
	rejects "$BAD/expand-addr.yaml" "expand-addr.yaml:16:142: a plan has no addresses"
}

@test "expand rejects a placement whose split does not match the tensor's rank" {
	rejects "$BAD/expand-split-rank.yaml" "expand-split-rank.yaml:19:62: split has 3 entries; tensor 'w' has rank 2"
}

@test "expand rejects a placement whose blocks do not cover the tensor's shape" {
	rejects "$BAD/expand-block-shape.yaml" "expand-block-shape.yaml:19:3: placement 'w@mm.b': axis 0 of extent 70"
}

@test "expand rejects a plan that does not fit in SRAM, naming tile, step, bytes and limit" {
	# 56000 - 52016 = 3984 bytes of planned data per tile
	run --separate-stderr amp-expand "$BAD/expand-sram.yaml"
	assert_failure 1
	assert_regex "$stderr" "^amp-expand: tile [0-9]+, step [0-9]+ \(op 'mm'\): placement '[^']+' needs SRAM bytes [0-9]+\.\.[0-9]+; 3984 are available"
	rejects "$BAD/expand-sram.yaml" "3984 are available (sram_bytes - reserved_bytes)"
}

@test "expand rejects a truncated zstd stream" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	run zstd -q --check c.yaml -o c.zst
	assert_success
	size=$(stat -c %s c.zst)
	head -c $((size - 4)) c.zst > cut-checksum.zst
	head -c $((size / 2)) c.zst > cut-half.yaml
	rejects cut-checksum.zst "'cut-checksum.zst': truncated zstd stream"
	rejects cut-half.yaml "'cut-half.yaml': truncated zstd stream"
	run --separate-stderr amp-expand - < cut-half.yaml
	assert_failure 1
	assert_equal "$stderr" "amp-expand: '<stdin>': truncated zstd stream"
}

@test "expand rejects a corrupt zstd stream" {
	composed "$MODELS/tiny-mlp.yaml" c.yaml
	run zstd -q --check c.yaml -o c.zst
	assert_success
	size=$(stat -c %s c.zst)
	# the frame checksum is wrong: the content parses, the stream does not
	head -c $((size - 4)) c.zst > bad-sum.zst
	printf '\0\0\0\0' >> bad-sum.zst
	run cmp -s c.zst bad-sum.zst
	assert_failure
	rejects bad-sum.zst "'bad-sum.zst': corrupt zstd stream"
	# zstd magic followed by garbage
	{ printf '\050\265\057\375'; head -c 200 c.yaml; } > garbage.yaml
	rejects garbage.yaml "'garbage.yaml': corrupt zstd stream"
}
