#!/usr/bin/env bats
# amp-exchange: expanded stage -> exchange stage. The command-line
# contract, phases and fragments (docs/machine.md §6: cut at max_transfer_bytes,
# joined where sender and every receiver continue), and malformed expanded
# stages (tests/bad/exchange-*).

load common
load stages
bats_require_minimum_version 1.5.0

# expanded MODEL OUT [MACHINE]: MODEL planned (for MACHINE), composed and
# expanded.
expanded() {
	if [ -n "${3:-}" ]; then
		run amp-plan --objective capacity --machine "$3" "$1" -o plan.tmp
	else
		run amp-plan --objective capacity "$1" -o plan.tmp
	fi
	assert_success
	run amp-compose plan.tmp -o composed.tmp
	assert_success
	run amp-expand composed.tmp -o "$2"
	assert_success
	assert [ -s "$2" ]
	rm -f plan.tmp composed.tmp
}

# exchanged EXPANDED OUT: amp-exchange's stage for EXPANDED.
exchanged() {
	run amp-exchange "$1" -o "$2"
	assert_success
	assert [ -s "$2" ]
}

# machine MAX OUT: the default machine with max_transfer_bytes MAX.
machine() {
	sed "s/^max_transfer_bytes: .*/max_transfer_bytes: $1/" "$MACHINES/amp1472.yaml" > "$2"
	run grep -c "^max_transfer_bytes: $1\$" "$2"
	assert_output 1
}

# send_lens FILE: the len of every send record, one per line.
send_lens() {
	sed -n 's/^- {step: [0-9]*, kind: send, len: \([0-9]*\), .*/\1/p' "$1"
}


# moves STAGE: the bytes a stage moves, as maximal runs that continue on
# the source and the receiver: "step kind src_tile dst_tile dst_addr
# src_addr len", one per receiver, sorted. Two stages that move the same
# bytes from the same places to the same places give the same lines,
# however their transfers are cut or folded.
moves() {
	members "$1" > moves.members
	awk '/^machine: / { s = $0; sub(/.* tiles: /, "", s); sub(/,.*/, "", s); print s; exit }' "$1" > moves.tiles
	awk -v T="$(cat moves.tiles)" '{
		for (j = 0; j < $8; j++) print $1, $2, $4, (($6 + j * $9) % T + T) % T, $7, $5, $3
	}' moves.members |
		sort -k1,1n -k2,2 -k3,3n -k4,4n -k5,5n -k6,6n |
		awk '{
			if (n && $1 == s && $2 == k && $3 == st && $4 == dt && $5 == da + len &&
			    ($2 == "zero" || $6 == sa + len)) { len += $7; next }
			if (n) print s, k, st, dt, da, sa, len
			s = $1; k = $2; st = $3; dt = $4; da = $5; sa = $6; len = $7; n = 1
		}
		END { if (n) print s, k, st, dt, da, sa, len }'
	rm -f moves.members moves.tiles
}

# rejects FILE EXPECTED: amp-exchange fails with status 1 and one message
# that starts with the tool name and contains EXPECTED; with -o it writes
# neither the target nor a temporary.
rejects() {
	run --separate-stderr amp-exchange "$1"
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^amp-exchange: '
	[[ "$stderr" == *"$2"* ]] || fail "expected '$2' in: $stderr"
	mkdir -p out
	run amp-exchange "$1" -o out/x.yaml
	assert_failure 1
	run ls -A out
	assert_output ""
}

# ---- A. command-line contract ----

@test "exchange --help prints usage and exit statuses to stdout and exits 0" {
	run --separate-stderr amp-exchange --help
	assert_success
	assert_line --index 0 --regexp '^Usage: amp-exchange '
	assert_output --partial '--output'
	assert_output --partial '--compress'
	assert_output --partial 'max_transfer_bytes'
	assert_output --partial 'Exit status: 0 success, 1 bad input or a write error, 2 usage error'
	assert_equal "$stderr" ""
}

@test "exchange --version prints the tool name and version" {
	run --separate-stderr amp-exchange --version
	assert_success
	assert_output --regexp '^amp-exchange \(amp\) [0-9]+\.[0-9]+\.[0-9]+$'
	assert_equal "$stderr" ""
}

@test "exchange rejects an unknown option with usage status 2" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	mkdir out
	run --separate-stderr amp-exchange --bogus e.yaml -o out/x.yaml
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-exchange: .*'--bogus'"
	assert_regex "$stderr" "Try 'amp-exchange --help'"
	run ls -A out
	assert_output ""
	run --separate-stderr amp-exchange -q e.yaml
	assert_failure 2
	assert_regex "$stderr" "^amp-exchange: .*'-q'"
}

@test "exchange rejects -o without a file with usage status 2" {
	run --separate-stderr amp-exchange -o
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "Try 'amp-exchange --help'"
}

@test "exchange rejects two stage arguments with usage status 2" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	cp e.yaml f.yaml
	run --separate-stderr amp-exchange e.yaml f.yaml
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "f\.yaml"
	assert_regex "$stderr" "Try 'amp-exchange --help'"
	mkdir out
	run amp-exchange e.yaml f.yaml -o out/x.yaml
	assert_failure 2
	run ls -A out
	assert_output ""
}

@test "exchange reports a missing stage file with status 1 naming it" {
	run --separate-stderr amp-exchange nosuch.yaml
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-exchange: cannot open 'nosuch.yaml': No such file or directory"
}

@test "exchange reads the same stage from a path, from '-' and from stdin" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml path.yaml
	reads_path_dash_stdin amp-exchange e.yaml path.yaml
}

@test "exchange recognises zstd input by its magic, not its name" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml expect.yaml
	reads_zstd_by_magic amp-exchange e.yaml expect.yaml
}

@test "exchange -z writes zstd that decompresses to the plain output" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml plain.yaml
	run amp-exchange -z e.yaml -o packed.zst
	assert_success
	run od -An -tx1 -N4 packed.zst
	assert_output ' 28 b5 2f fd'
	run cmp -s plain.yaml packed.zst
	assert_failure
	run zstd -q -d packed.zst -o unpacked.yaml
	assert_success
	run cmp plain.yaml unpacked.yaml
	assert_success
	run amp-group packed.zst -o g-packed.yaml
	assert_success
	run amp-group plain.yaml -o g-plain.yaml
	assert_success
	run cmp g-plain.yaml g-packed.yaml
	assert_success
}

@test "exchange -o leaves only the target after success" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	mkdir out
	run --separate-stderr amp-exchange e.yaml -o out/x.yaml
	assert_success
	assert_equal "$output" ""
	run ls -A out
	assert_output 'x.yaml'
}

@test "exchange -o on failure leaves no target and no temporary" {
	mkdir out
	run amp-exchange "$BAD/exchange-version.yaml" -o out/x.yaml
	assert_failure 1
	run ls -A out
	assert_output ""
	# a failure late in the file, after most records were read
	run amp-exchange "$BAD/exchange-step-missing.yaml" -o out/x.yaml
	assert_failure 1
	run ls -A out
	assert_output ""
}

@test "exchange -o on failure keeps an existing target unchanged" {
	mkdir out
	echo 'previous contents' > out/x.yaml
	run amp-exchange "$BAD/exchange-kind.yaml" -o out/x.yaml
	assert_failure 1
	run cat out/x.yaml
	assert_output 'previous contents'
	run ls -A out
	assert_output 'x.yaml'
}

@test "exchange -o into a missing directory fails with status 1 naming the target" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	run --separate-stderr amp-exchange e.yaml -o nodir/x.yaml
	assert_failure 1
	assert_regex "$stderr" "^amp-exchange: cannot create 'nodir/x\.yaml"
	assert [ ! -e nodir ]
}

@test "exchange gives identical bytes for the same input twice" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml one.yaml
	exchanged e.yaml two.yaml
	run cmp one.yaml two.yaml
	assert_success
	run amp-exchange -z e.yaml -o one.zst
	assert_success
	run amp-exchange -z e.yaml -o two.zst
	assert_success
	run cmp one.zst two.zst
	assert_success
}

@test "exchange writes an amp-exchange version 7 header, provenance after it, with the stage's machine and model" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml x.yaml
	run sed -n 1,4p x.yaml
	assert_line --index 0 'format: amp-exchange'
	assert_line --index 1 'version: 17'
	assert_line --index 2 "$(sed -n 3p e.yaml)"
	assert_line --index 3 'model: tiny-mlp'
	run sed -n 5p x.yaml
	assert_output 'provenance:'
}

# ---- B. phases and fragments ----

@test "exchange keeps the expanded stage's tensors, gemms, placements and steps" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml x.yaml
	sed -e 1d -e '/^transfers:$/,$d' e.yaml > e-head.yaml
	sed -e 1d -e '/^phases:$/,$d' x.yaml > x-head.yaml
	assert [ -s e-head.yaml ]
	run same_but_provenance e-head.yaml x-head.yaml
	assert_success
}

@test "exchange adds a phases section between the steps and the transfers" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml x.yaml
	run grep -c '^phases:$' e.yaml
	assert_output 0
	run grep -n '^\(steps\|phases\|transfers\):$' x.yaml
	assert_equal "${#lines[@]}" 3
	assert_regex "${lines[0]}" ':steps:$'
	assert_regex "${lines[1]}" ':phases:$'
	assert_regex "${lines[2]}" ':transfers:$'
	run grep -c '^- {phase: [0-9]*, steps: \[[0-9]*, [0-9]*\], label: [^,]*}$' x.yaml
	assert [ "$output" -ge 5 ]
}

@test "exchange makes one phase per copy step that sends, in step order, labelled op.operand" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml x.yaml
	# expected from the expanded stage: each copy step with a send
	awk '
	/^- \{step: [0-9]+, copy: / { s = $3; sub(/,/, "", s); op[s] = $7; opd[s] = $9
		sub(/,/, "", op[s]); sub(/,/, "", opd[s]) }
	/^- \{step: [0-9]+, kind: send,/ { s = $3; sub(/,/, "", s)
		if (!(s in seen)) { seen[s] = 1; printf "- {phase: %d, steps: [%s, %s], label: %s.%s}\n", n++, s, s, op[s], opd[s] } }
	' e.yaml > expect.txt
	run wc -l < expect.txt
	assert [ "$output" -ge 5 ]
	grep '^- {phase: ' x.yaml > phases.txt
	run diff expect.txt phases.txt
	assert_success
	assert_output ""
	# tiny-mlp: ln's scale and bias, mlp_up's a, b and bias, its out, ...
	run sed -n 1p phases.txt
	assert_output '- {phase: 0, steps: [0, 0], label: ln.scale}'
}

@test "exchange leaves local copies and zero fills as they are" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml x.yaml
	grep '^- {step: [0-9]*, kind: \(local\|zero\),' e.yaml > e-local.txt
	grep '^- {step: [0-9]*, kind: \(local\|zero\),' x.yaml > x-local.txt
	run wc -l < e-local.txt
	assert [ "$output" -ge 5 ]
	run cmp e-local.txt x-local.txt
	assert_success
}

@test "exchange sends no fragment above the machine's max_transfer_bytes" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml x.yaml
	max=$(sed -n 's/^machine: .* max_transfer_bytes: \([0-9]*\),.*/\1/p' x.yaml)
	assert_equal "$max" 16592
	send_lens x.yaml > lens.txt
	run wc -l < lens.txt
	assert [ "$output" -ge 10 ]
	run awk -v max="$max" '$1 > max { print "send of " $1 " bytes" }' lens.txt
	assert_output ""
}

@test "exchange cuts every send at a small max_transfer_bytes and moves the same bytes" {
	machine 64 m64.yaml
	expanded "$MODELS/tiny-mlp.yaml" e.yaml m64.yaml
	exchanged e.yaml x.yaml
	run grep -c '^machine: .* max_transfer_bytes: 64,' x.yaml
	assert_output 1
	# the expanded stage has longer spans...
	run awk '$1 > 64' <(send_lens e.yaml)
	assert [ "${#lines[@]}" -ge 3 ]
	# ...the exchange stage has none
	send_lens x.yaml > lens.txt
	run wc -l < lens.txt
	assert [ "$output" -ge 10 ]
	run awk '$1 > 64 { print "send of " $1 " bytes" }' lens.txt
	assert_output ""
	# and together its fragments move exactly the expanded stage's bytes
	moves e.yaml > e-moves.txt
	moves x.yaml > x-moves.txt
	run wc -l < e-moves.txt
	assert [ "$output" -ge 100 ]
	run cmp e-moves.txt x-moves.txt
	assert_success
}

@test "exchange cuts a span that is not a multiple of max_transfer_bytes into full fragments and a tail" {
	machine 100 m100.yaml
	expanded "$MODELS/tiny-mlp.yaml" e.yaml m100.yaml
	exchanged e.yaml x.yaml
	send_lens x.yaml > lens.txt
	run awk '$1 > 100 { print "send of " $1 " bytes" }' lens.txt
	assert_output ""
	# 100-byte fragments and the tails no expanded span has: 704 = 7 x 100 + 4,
	# 512 = 5 x 100 + 12, 832 = 8 x 100 + 32
	run grep -c '^100$' lens.txt
	assert [ "$output" -ge 1 ]
	run grep -c '^4$' lens.txt
	assert [ "$output" -ge 1 ]
	run grep -c '^12$' lens.txt
	assert [ "$output" -ge 1 ]
	run grep -c '^- {step: [0-9]*, kind: send, len: 100, .* loops: \[\[8, 0, 100, 0, 100\]' x.yaml
	assert [ "$output" -ge 1 ]
	run grep -c '^- {step: [0-9]*, kind: send, len: \(4\|12\), ' e.yaml
	assert_output 0
	moves e.yaml > e-moves.txt
	moves x.yaml > x-moves.txt
	run cmp e-moves.txt x-moves.txt
	assert_success
}

@test "exchange moves the same bytes as the expanded stage at the default machine" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml x.yaml
	moves e.yaml > e-moves.txt
	moves x.yaml > x-moves.txt
	run wc -l < e-moves.txt
	assert [ "$output" -ge 100 ]
	run cmp e-moves.txt x-moves.txt
	assert_success
}

@test "exchange joins a send family that continues on the sender and every receiver into one fragment" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	exchanged e.yaml x.yaml
	# the same stage with every even-length send written as a family of two
	# halves that continue on both sides
	awk '
	/^- \{step: [0-9]+, kind: send, len: / {
		l = $0; sub(/.* len: /, "", l); sub(/,.*/, "", l); l += 0
		lp = $0; sub(/.*loops: /, "", lp); nl = gsub(/\[/, "", lp) - 1
		if (l % 2 == 0 && nl < 6) {
			h = l / 2
			sub(/len: [0-9]+,/, "len: " h ",")
			if (nl == 0) sub(/loops: \[\]/, "loops: [[2, 0, " h ", 0, " h "]]")
			else sub(/loops: \[/, "loops: [[2, 0, " h ", 0, " h "], ")
			n++
		}
	}
	{ print }
	END { print n > "split.count" }' e.yaml > halves.yaml
	run cat split.count
	assert [ "$output" -ge 10 ]
	run cmp -s e.yaml halves.yaml
	assert_failure
	run grep -c 'kind: send, len: 256, .* loops: \[\[2, 0, 256, 0, 256\]' halves.yaml
	assert [ "$output" -ge 1 ]
	exchanged halves.yaml joined.yaml
	run cmp x.yaml joined.yaml
	assert_success
}

# ---- C. malformed expanded stages ----

@test "exchange rejects a stage file of another format" {
	rejects "$BAD/exchange-wrong-format.yaml" "exchange-wrong-format.yaml:2:9: expected format 'amp-expand', found 'amp-plan'"
}

@test "exchange rejects a real plan and a real exchange stage" {
	run amp-plan "$MODELS/tiny-mlp.yaml" -o p.yaml
	assert_success
	run amp-compose p.yaml -o c.yaml
	assert_success
	rejects c.yaml "c.yaml:1:9: expected format 'amp-expand', found 'amp-plan'"
	run amp-expand c.yaml -o e.yaml
	assert_success
	exchanged e.yaml x.yaml
	rejects x.yaml "x.yaml:1:9: expected format 'amp-expand', found 'amp-exchange'"
}

@test "exchange rejects an expanded stage of an unsupported version" {
	rejects "$BAD/exchange-version.yaml" "exchange-version.yaml:3:10: unsupported amp-expand version 18"
}

@test "exchange rejects a transfer to a tile beyond the machine" {
	rejects "$BAD/exchange-tile.yaml" "exchange-tile.yaml:34:54: "
	rejects "$BAD/exchange-tile.yaml" "1472"
}

@test "exchange rejects a transfer whose addresses run past SRAM" {
	rejects "$BAD/exchange-sram.yaml" "exchange-sram.yaml:37:54: destination addresses 638900..639092 are outside SRAM (638976 bytes)"
}

@test "exchange rejects a transfer on a step that does not exist" {
	rejects "$BAD/exchange-step-missing.yaml" "exchange-step-missing.yaml:44:10: "
	rejects "$BAD/exchange-step-missing.yaml" " 5 "
}

@test "exchange rejects a transfer on a compute step" {
	rejects "$BAD/exchange-step-compute.yaml" "exchange-step-compute.yaml:44:10: step 3 is not a copy"
}

@test "exchange rejects a transfer with an unknown key" {
	rejects "$BAD/exchange-transfer-key.yaml" "exchange-transfer-key.yaml:38:78: unknown key 'via'"
}

@test "exchange rejects a transfer of an unknown kind" {
	rejects "$BAD/exchange-kind.yaml" "exchange-kind.yaml:31:19: unknown kind 'copy' (expected send, local or zero)"
}

@test "exchange rejects a multicast that names the same receiver twice" {
	# recv [2, 0]: two receivers a tile step of 0 apart, both tile 0
	mkdir out
	run --separate-stderr amp-exchange "$BAD/exchange-recv-twice.yaml" -o out/x.yaml
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-exchange: .*exchange-recv-twice\.yaml:38:[0-9]+: .*rec"
	run ls -A out
	assert_output ""
}

@test "exchange rejects a placement whose split does not match the tensor's rank" {
	rejects "$BAD/exchange-split-rank.yaml" "exchange-split-rank.yaml:19:62: split has 3 entries; tensor 'w' has rank 2"
}

@test "exchange rejects a placement whose blocks do not cover the tensor's shape" {
	rejects "$BAD/exchange-block-shape.yaml" "exchange-block-shape.yaml:19:3: placement 'w@mm.b': axis 0 of extent 70"
}

@test "exchange rejects a placement whose layout does not fit its copy" {
	rejects "$BAD/exchange-layout.yaml" "exchange-layout.yaml:25:3: map 'native-panel' does not match the placements (expected 'relayout')"
}

@test "exchange rejects a placement without an address" {
	rejects "$BAD/exchange-no-addr.yaml" "exchange-no-addr.yaml:21:3: missing key 'addr'"
}

@test "exchange rejects a truncated zstd stream" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	run zstd -q --check e.yaml -o e.zst
	assert_success
	size=$(stat -c %s e.zst)
	head -c $((size - 4)) e.zst > cut-checksum.zst
	head -c $((size / 2)) e.zst > cut-half.yaml
	rejects cut-checksum.zst "'cut-checksum.zst': truncated zstd stream"
	rejects cut-half.yaml "'cut-half.yaml': truncated zstd stream"
	run --separate-stderr amp-exchange < cut-half.yaml
	assert_failure 1
	assert_equal "$stderr" "amp-exchange: '<stdin>': truncated zstd stream"
}

@test "exchange rejects a corrupt zstd stream" {
	expanded "$MODELS/tiny-mlp.yaml" e.yaml
	run zstd -q --check e.yaml -o e.zst
	assert_success
	size=$(stat -c %s e.zst)
	head -c $((size - 4)) e.zst > bad-sum.zst
	printf '\0\0\0\0' >> bad-sum.zst
	run cmp -s e.zst bad-sum.zst
	assert_failure
	rejects bad-sum.zst "'bad-sum.zst': corrupt zstd stream"
	{ printf '\050\265\057\375'; head -c 200 e.yaml; } > garbage.yaml
	rejects garbage.yaml "'garbage.yaml': corrupt zstd stream"
}
