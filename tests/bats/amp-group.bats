#!/usr/bin/env bats
# amp-group: exchange stage -> grouped stage. The command-line contract,
# phase merging and parameter forwarding (docs/machine.md §6), and malformed
# exchange stages (tests/bad/group-*).

load common
load stages
bats_require_minimum_version 1.5.0

# exchanged MODEL OUT: MODEL planned, composed, expanded and exchanged.
exchanged() {
	run amp-plan --objective capacity "$1" -o plan.tmp
	assert_success
	run amp-compose plan.tmp -o composed.tmp
	assert_success
	run amp-expand composed.tmp -o expanded.tmp
	assert_success
	run amp-exchange expanded.tmp -o "$2"
	assert_success
	assert [ -s "$2" ]
	rm -f plan.tmp composed.tmp expanded.tmp
}

# grouped EXCHANGE OUT [OPTION...]: amp-group's stage for EXCHANGE.
grouped() {
	local in=$1 out=$2
	shift 2
	run amp-group "$@" "$in" -o "$out"
	assert_success
	assert [ -s "$out" ]
}

# phases FILE: "first last label" per phase.
phases() {
	sed -n 's/^- {phase: [0-9]*, steps: \[\([0-9]*\), \([0-9]*\)\], label: \([^}]*\)}$/\1 \2 \3/p' "$1"
}

# transfers FILE: the transfers section's records.
transfers() {
	sed -n '/^transfers:$/,$p' "$1" | sed 1d
}


# received STAGE: what each tile receives, "step receiver dst_addr len",
# one line per receiver of every member, sorted.
received() {
	members "$1" | awk -v T=1472 '$2 == "send" {
		for (j = 0; j < $8; j++) print $1, (($6 + j * $9) % T + T) % T, $7, $3
	}' | sort
}

# rejects FILE EXPECTED: amp-group fails with status 1 and one message
# that starts with the tool name and contains EXPECTED; with -o it writes
# neither the target nor a temporary.
rejects() {
	run --separate-stderr amp-group "$1"
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^amp-group: '
	[[ "$stderr" == *"$2"* ]] || fail "expected '$2' in: $stderr"
	mkdir -p out
	run amp-group "$1" -o out/g.yaml
	assert_failure 1
	run amp-group --weights direct "$1" -o out/g.yaml
	assert_failure 1
	run ls -A out
	assert_output ""
}

# ---- A. command-line contract ----

@test "group --help prints usage, both weight modes and exit statuses to stdout and exits 0" {
	run --separate-stderr amp-group --help
	assert_success
	assert_line --index 0 --regexp '^Usage: amp-group '
	assert_output --partial '--weights'
	assert_output --partial "'forward'"
	assert_output --partial "'direct'"
	assert_output --partial '--output'
	assert_output --partial '--compress'
	assert_output --partial 'Exit status: 0 success, 1 bad input or a write error, 2 usage error'
	assert_equal "$stderr" ""
}

@test "group --version prints the tool name and version" {
	run --separate-stderr amp-group --version
	assert_success
	assert_output --regexp '^amp-group \(amp\) [0-9]+\.[0-9]+\.[0-9]+$'
	assert_equal "$stderr" ""
}

@test "group rejects an unknown option with usage status 2" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	mkdir out
	run --separate-stderr amp-group --bogus x.yaml -o out/g.yaml
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-group: .*'--bogus'"
	assert_regex "$stderr" "Try 'amp-group --help'"
	run ls -A out
	assert_output ""
}

@test "group rejects a --weights value other than forward, direct or auto with usage status 2" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	mkdir out
	for v in bogus Direct ''; do
		run --separate-stderr amp-group --weights "$v" x.yaml -o out/g.yaml
		assert_failure 2
		assert_equal "$output" ""
		assert_regex "$stderr" "^amp-group: .*'$v'"
		assert_regex "$stderr" "Try 'amp-group --help'"
	done
	run --separate-stderr amp-group x.yaml --weights
	assert_failure 2
	assert_regex "$stderr" "^amp-group: .*--weights"
	run ls -A out
	assert_output ""
}

@test "group rejects -o without a file with usage status 2" {
	run --separate-stderr amp-group -o
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "Try 'amp-group --help'"
}

@test "group rejects two stage arguments with usage status 2" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	cp x.yaml y.yaml
	run --separate-stderr amp-group x.yaml y.yaml
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "y\.yaml"
	assert_regex "$stderr" "Try 'amp-group --help'"
	mkdir out
	run amp-group x.yaml y.yaml -o out/g.yaml
	assert_failure 2
	run ls -A out
	assert_output ""
}

@test "group reports a missing stage file with status 1 naming it" {
	run --separate-stderr amp-group nosuch.yaml
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-group: cannot open 'nosuch.yaml': No such file or directory"
}

@test "group reads the same stage from a path, from '-' and from stdin" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	grouped x.yaml path.yaml
	reads_path_dash_stdin amp-group x.yaml path.yaml
}

@test "group recognises zstd input by its magic, not its name" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	grouped x.yaml expect.yaml
	reads_zstd_by_magic amp-group x.yaml expect.yaml
}

@test "group -z writes zstd that decompresses to the plain output" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	for mode in forward direct; do
		grouped x.yaml plain.yaml --weights "$mode"
		run amp-group --weights "$mode" -z x.yaml -o packed.zst
		assert_success
		run od -An -tx1 -N4 packed.zst
		assert_output ' 28 b5 2f fd'
		run cmp -s plain.yaml packed.zst
		assert_failure
		run zstd -q -d -f packed.zst -o unpacked.yaml
		assert_success
		run cmp plain.yaml unpacked.yaml
		assert_success
	done
}

@test "group -o leaves only the target after success" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	mkdir out
	run --separate-stderr amp-group x.yaml -o out/g.yaml
	assert_success
	assert_equal "$output" ""
	run ls -A out
	assert_output 'g.yaml'
}

@test "group -o on failure leaves no target and no temporary" {
	mkdir out
	run amp-group "$BAD/group-version.yaml" -o out/g.yaml
	assert_failure 1
	run ls -A out
	assert_output ""
	run amp-group "$BAD/group-kind.yaml" -o out/g.yaml
	assert_failure 1
	run ls -A out
	assert_output ""
}

@test "group -o on failure keeps an existing target unchanged" {
	mkdir out
	echo 'previous contents' > out/g.yaml
	run amp-group "$BAD/group-phase-order.yaml" -o out/g.yaml
	assert_failure 1
	run cat out/g.yaml
	assert_output 'previous contents'
	run ls -A out
	assert_output 'g.yaml'
}

@test "group -o into a missing directory fails with status 1 naming the target" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	run --separate-stderr amp-group x.yaml -o nodir/g.yaml
	assert_failure 1
	assert_regex "$stderr" "^amp-group: cannot create 'nodir/g\.yaml"
	assert [ ! -e nodir ]
}

@test "group gives identical bytes for the same input twice, in both weight modes" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	for mode in forward direct; do
		grouped x.yaml one.yaml --weights "$mode"
		grouped x.yaml two.yaml --weights "$mode"
		run cmp one.yaml two.yaml
		assert_success
		run amp-group --weights "$mode" -z x.yaml -o one.zst
		assert_success
		run amp-group --weights "$mode" -z x.yaml -o two.zst
		assert_success
		run cmp one.zst two.zst
		assert_success
	done
}

@test "group writes an amp-group version 7 header, provenance after it, with the stage's machine and model" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	grouped x.yaml g.yaml
	run sed -n 1,4p g.yaml
	assert_line --index 0 'format: amp-group'
	assert_line --index 1 'version: 17'
	assert_line --index 2 "$(sed -n 3p x.yaml)"
	assert_line --index 3 'model: tiny-mlp'
	run sed -n 5p g.yaml
	assert_output 'provenance:'
}

@test "group chooses the weights per phase by default (auto), which is direct wherever forwarding costs more cycles" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	grouped x.yaml default.yaml
	grouped x.yaml auto.yaml --weights auto
	grouped x.yaml forward.yaml --weights forward
	grouped x.yaml direct.yaml --weights direct
	run same_but_provenance default.yaml auto.yaml
	assert_success
	# on tiny-mlp forwarding adds a hop: no phase has fewer modelled cycles
	# (amp-capture's), some have more, and auto keeps every phase direct
	amp-capture forward.yaml -o f.json
	amp-capture direct.yaml -o d.json
	fc=$(jq -r '[.phases[].cycles] | @tsv' f.json)
	dc=$(jq -r '[.phases[].cycles] | @tsv' d.json)
	awk -v f="$fc" -v d="$dc" 'BEGIN { n = split(f, a, "\t"); m = split(d, b, "\t"); if (n != m || n < 5) exit 1
		for (i = 1; i <= n; i++) { if (a[i] + 0 < b[i] + 0) exit 1; more += a[i] > b[i] } exit !more }' ||
		fail "forwarding was not slower: forward $fc, direct $dc"
	run same_but_provenance default.yaml direct.yaml
	assert_success
	run cmp -s forward.yaml direct.yaml
	assert_failure
	# forwarding adds transfers: the forward after each delivery
	nf=$(transfers forward.yaml | wc -l)
	nd=$(transfers direct.yaml | wc -l)
	assert [ "$nf" -gt "$nd" ]
	# the phases do not depend on the weight mode
	run diff <(phases forward.yaml) <(phases direct.yaml)
	assert_success
}

# ---- B. merging and forwarding ----

@test "group keeps the exchange stage's tensors, gemms, placements and steps" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	grouped x.yaml g.yaml
	sed -e 1d -e '/^phases:$/,$d' x.yaml > x-head.yaml
	sed -e 1d -e '/^phases:$/,$d' g.yaml > g-head.yaml
	assert [ -s x-head.yaml ]
	run same_but_provenance x-head.yaml g-head.yaml
	assert_success
}

@test "group never has more phases than amp-exchange, and merges some on tiny-mlp" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	grouped x.yaml g.yaml
	grouped x.yaml d.yaml --weights direct
	nx=$(phases x.yaml | wc -l)
	ng=$(phases g.yaml | wc -l)
	nd=$(phases d.yaml | wc -l)
	assert [ "$nx" -ge 5 ]
	assert [ "$ng" -ge 1 ]
	assert [ "$ng" -le "$nx" ]
	assert [ "$nd" -le "$nx" ]
	assert [ "$ng" -lt "$nx" ]
	run grep -c '^- {phase: [0-9]*, steps: \[[0-9]*, [0-9]*\], label: [^,}]*+[^,}]*}$' g.yaml
	assert [ "$output" -ge 1 ]
	# ln's scale and bias are delivered together
	run phases g.yaml
	assert_line --index 0 '0 1 ln.scale+ln.bias'
}

@test "group merges exactly the phases that no compute step separates" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	grouped x.yaml g.yaml
	grep '^- {step: [0-9]*, compute: ' x.yaml | sed 's/^- {step: \([0-9]*\),.*/\1/' > compute.txt
	run wc -l < compute.txt
	assert [ "$output" -ge 3 ]
	phases x.yaml > x-phases.txt
	phases g.yaml > g-phases.txt
	# expected: runs of exchange phases with no compute step between them,
	# their labels joined with '+'
	run awk '
	FILENAME == ARGV[1] { compute[$1] = 1; next }
	{
		if (n) { sep = 0; for (s = last + 1; s < $1; s++) if (s in compute) sep = 1 }
		if (!n || sep) { if (n) print first, last, label; first = $1; label = $3 }
		else label = label "+" $3
		last = $2; n++
	}
	END { if (n) print first, last, label }' compute.txt x-phases.txt
	assert_success
	printf '%s\n' "$output" > expect.txt
	run diff expect.txt g-phases.txt
	assert_success
	assert_output ""
	# and no grouped phase contains a compute step
	run awk 'FILENAME == ARGV[1] { compute[$1] = 1; next }
	         { for (s = $1; s <= $2; s++) if (s in compute) print "phase " $3 " holds compute step " s }' \
		compute.txt g-phases.txt
	assert_output ""
}

@test "group --weights direct --schedule record keeps amp-exchange's transfers as they are" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	grouped x.yaml d.yaml --weights direct --schedule record
	transfers x.yaml > x-transfers.txt
	transfers d.yaml > d-transfers.txt
	run wc -l < x-transfers.txt
	assert [ "$output" -ge 10 ]
	run cmp x-transfers.txt d-transfers.txt
	assert_success
}

# sorted_members STAGE: its members, sorted (which bytes move, not in what order).
sorted_members() {
	members "$1" | LC_ALL=C sort
}

@test "group's schedule reorders a phase of compose-shared-stage: the same members, each step's in place, fewer cycles" {
	exchanged "$ROOT/tests/models/compose-shared-stage.yaml" x.yaml
	grouped x.yaml r.yaml --weights direct --schedule record
	run --separate-stderr amp-group -v --weights direct x.yaml -o s.yaml
	assert_success
	[[ "$stderr" =~ ^amp-group:\ ([0-9]+)\ of\ ([0-9]+)\ phases\ reordered\;\ exchange\ ([0-9]+)\ -\>\ ([0-9]+)\ cycles ]]
	assert [ "${BASH_REMATCH[1]}" -ge 1 ]
	assert [ "${BASH_REMATCH[4]}" -lt "${BASH_REMATCH[3]}" ]
	run cmp -s r.yaml s.yaml
	assert_failure
	# the same members move
	sorted_members r.yaml > r-members.txt
	sorted_members s.yaml > s-members.txt
	run cmp r-members.txt s-members.txt
	assert_success
	# each step's records stay together, steps in program order
	run sh -c "transfers_steps() { sed -n '/^transfers:\$/,\$p' \"\$1\" | sed -n 's/^- {step: \\([0-9]*\\),.*/\\1/p'; }; transfers_steps s.yaml | sort -n -c"
	assert_success
	# amp-capture's replay of each agrees with what -v said
	run amp-capture r.yaml -o r.json
	assert_success
	run amp-capture s.yaml -o s.json
	assert_success
	run jq '[.phases[].cycles] | add' r.json
	assert_output "${BASH_REMATCH[3]}"
	run jq '[.phases[].cycles] | add' s.json
	assert_output "${BASH_REMATCH[4]}"
}

@test "group's schedule keeps every (sender, receiver) pair's order" {
	exchanged "$ROOT/tests/models/compose-shared-stage.yaml" x.yaml
	grouped x.yaml r.yaml --weights direct --schedule record
	grouped x.yaml s.yaml --weights direct
	members r.yaml | awk '$2 == "send" { print $1, $4, $6, $0 }' | sort -s -k1,1n -k2,2n -k3,3n > r-pairs.txt
	members s.yaml | awk '$2 == "send" { print $1, $4, $6, $0 }' | sort -s -k1,1n -k2,2n -k3,3n > s-pairs.txt
	run cmp r-pairs.txt s-pairs.txt
	assert_success
}

@test "group rejects a --schedule value other than list or record with usage status 2" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	run --separate-stderr amp-group --schedule greedy x.yaml
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-group: --schedule takes 'list' or 'record', not 'greedy'"
}

@test "group --weights forward splits each parameter multicast into a delivery and a forward" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	# in record order: the schedule may reorder (and refold) any phase
	grouped x.yaml g.yaml --weights forward --schedule record
	# parameter steps, and their multicasts in the exchange stage; a multicast
	# whose sender is its own first receiver stays one (the sender would
	# forward to itself), so those are not counted
	grep '^- {step: [0-9]*, copy: parameter,' x.yaml | sed 's/^- {step: \([0-9]*\),.*/\1/' > param.txt
	run wc -l < param.txt
	assert [ "$output" -ge 4 ]
	multicasts=$(transfers x.yaml | awk 'FILENAME == ARGV[1] { p[$1] = 1; next }
		{ s = $3; sub(/,/, "", s) }
		(s in p) && / kind: send, / && !/ recv: \[1, / {
			match($0, /src: \[[0-9]+,/); st = substr($0, RSTART + 6, RLENGTH - 7)
			match($0, /dst: \[[0-9]+,/); dt = substr($0, RSTART + 6, RLENGTH - 7)
			if (st != dt) n++
		} END { print n + 0 }' param.txt -)
	assert [ "$multicasts" -ge 2 ]
	nx=$(transfers x.yaml | wc -l)
	ng=$(transfers g.yaml | wc -l)
	assert_equal "$ng" "$((nx + multicasts))"
	# every other step's transfers are untouched
	only_other() { awk 'FILENAME == ARGV[1] { p[$1] = 1; next } { s = $3; sub(/,/, "", s) } !(s in p)' param.txt -; }
	run diff <(transfers x.yaml | only_other) <(transfers g.yaml | only_other)
	assert_success
}

@test "group --weights forward and direct deliver the same bytes to the same receivers" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	grouped x.yaml g.yaml --weights forward
	grouped x.yaml d.yaml --weights direct
	received x.yaml > x-recv.txt
	received g.yaml > g-recv.txt
	received d.yaml > d-recv.txt
	run wc -l < x-recv.txt
	assert [ "$output" -ge 100 ]
	run cmp x-recv.txt d-recv.txt
	assert_success
	run cmp x-recv.txt g-recv.txt
	assert_success
}

@test "group --weights forward reads forwarded bytes only after their delivery in the same step" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	grouped x.yaml g.yaml --weights forward
	members x.yaml > x-members.txt
	members g.yaml > g-members.txt
	# every source span of the grouped stage is either one amp-exchange read
	# or bytes an earlier transfer of the same step wrote to that tile
	run awk -v T=1472 '
	FILENAME == ARGV[1] { if ($2 != "zero") src[$1 " " $4 " " $5 " " $3] = 1; next }
	$2 != "zero" {
		k = $1 " " $4 " " $5 " " $3
		if (!(k in src)) { fwd++; if (!(k in wrote)) print "reads before delivery: " $0 }
	}
	{ for (j = 0; j < $8; j++) wrote[$1 " " (($6 + j * $9) % T + T) % T " " $7 " " $3] = 1 }
	END { if (!fwd) print "no forwards" }' x-members.txt g-members.txt
	assert_success
	assert_output ""
}

@test "group --weights forward never makes a send whose only receiver is its sender" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	# docs/machine.md §2: a move whose only receiver is the sender is a local copy.
	# tiny-mlp's ln_s home shard on tile 0 is multicast to tiles 0..36, so
	# the delivery to the first receiver must not be tile 0 sending to itself.
	for mode in direct forward; do
		grouped x.yaml g.yaml --weights "$mode"
		members g.yaml > m.txt
		run grep -c ' send ' m.txt
		assert [ "$output" -ge 100 ]
		run awk -v mode="$mode" '$2 == "send" && $8 == 1 && $4 == $6 {
			print mode ": step " $1 ": tile " $4 " sends " $3 " bytes at " $5 " to itself at " $7 }' m.txt
		assert_output ""
	done
}

# ---- C. malformed exchange stages ----

@test "group rejects a stage file of another format" {
	rejects "$BAD/group-wrong-format.yaml" "group-wrong-format.yaml:2:9: expected format 'amp-exchange', found 'amp-expand'"
}

@test "group rejects a real expanded stage and a real grouped stage" {
	run amp-plan "$MODELS/tiny-mlp.yaml" -o p.yaml
	assert_success
	run amp-compose p.yaml -o c.yaml
	assert_success
	run amp-expand c.yaml -o e.yaml
	assert_success
	rejects e.yaml "e.yaml:1:9: expected format 'amp-exchange', found 'amp-expand'"
	run amp-exchange e.yaml -o x.yaml
	assert_success
	grouped x.yaml g.yaml
	rejects g.yaml "g.yaml:1:9: expected format 'amp-exchange', found 'amp-group'"
	rejects c.yaml "c.yaml:1:9: expected format 'amp-exchange', found 'amp-plan'"
}

@test "group rejects an exchange stage of an unsupported version" {
	rejects "$BAD/group-version.yaml" "group-version.yaml:3:10: unsupported amp-exchange version 18"
}

@test "group rejects a phase whose steps do not come after the previous phase" {
	rejects "$BAD/group-phase-order.yaml" "group-phase-order.yaml:31:21: steps must be [first, last], after the previous phase"
}

@test "group rejects a phase whose first step comes after its last" {
	rejects "$BAD/group-phase-range.yaml" "group-phase-range.yaml:32:21: steps must be [first, last]"
}

@test "group rejects phases numbered out of order" {
	rejects "$BAD/group-phase-number.yaml" "group-phase-number.yaml:31:11: expected phase 1, found 2"
}

@test "group rejects a phase that contains a compute step" {
	mkdir out
	run --separate-stderr amp-group "$BAD/group-phase-compute.yaml" -o out/g.yaml
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-group: .*group-phase-compute\.yaml:31:[0-9]+: .*step 3"
	run ls -A out
	assert_output ""
}

@test "group rejects a send on a copy step that no phase covers" {
	mkdir out
	run --separate-stderr amp-group "$BAD/group-phase-missing.yaml" -o out/g.yaml
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-group: .*group-phase-missing\.yaml:[0-9]+:[0-9]+: .*step 4"
	run ls -A out
	assert_output ""
}

@test "group rejects a transfer from a tile beyond the machine" {
	rejects "$BAD/group-tile.yaml" "group-tile.yaml:42:41: "
	rejects "$BAD/group-tile.yaml" "1500"
}

@test "group rejects a transfer of an unknown kind" {
	rejects "$BAD/group-kind.yaml" "group-kind.yaml:42:19: unknown kind 'forward' (expected send, local or zero)"
}

@test "group rejects a transfer on a compute step" {
	rejects "$BAD/group-step-compute.yaml" "group-step-compute.yaml:34:10: step 0 is not a copy"
}

@test "group rejects a placement without an address" {
	rejects "$BAD/group-no-addr.yaml" "group-no-addr.yaml:19:3: missing key 'addr'"
}

@test "group rejects a truncated zstd stream" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	run zstd -q --check x.yaml -o x.zst
	assert_success
	size=$(stat -c %s x.zst)
	head -c $((size - 4)) x.zst > cut-checksum.zst
	head -c $((size / 2)) x.zst > cut-half.yaml
	rejects cut-checksum.zst "'cut-checksum.zst': truncated zstd stream"
	rejects cut-half.yaml "'cut-half.yaml': truncated zstd stream"
	run --separate-stderr amp-group - < cut-half.yaml
	assert_failure 1
	assert_equal "$stderr" "amp-group: '<stdin>': truncated zstd stream"
}

@test "group rejects a corrupt zstd stream" {
	exchanged "$MODELS/tiny-mlp.yaml" x.yaml
	run zstd -q --check x.yaml -o x.zst
	assert_success
	size=$(stat -c %s x.zst)
	head -c $((size - 4)) x.zst > bad-sum.zst
	printf '\0\0\0\0' >> bad-sum.zst
	run cmp -s x.zst bad-sum.zst
	assert_failure
	rejects bad-sum.zst "'bad-sum.zst': corrupt zstd stream"
	{ printf '\050\265\057\375'; head -c 200 x.yaml; } > garbage.yaml
	rejects garbage.yaml "'garbage.yaml': corrupt zstd stream"
}

@test "group never merges phases across a repeat's boundary: a copy phase before the body and the body's first stay two, and run" {
	amp-plan "$ROOT/tests/models/group-repeat-boundary.yaml" | amp-compose > c.yaml
	# the weight's copy (loop-invariant) moved ahead of the body: mm.b
	# outside, then mm.a, the body's first step, with no compute between
	awk '
	/^- \{step: 1, copy: activation, op: mm, operand: a,/ { a = $0; sub(/step: 1,/, "step: 2,", a); next }
	/^- \{step: 2, copy: parameter, op: mm, operand: b,/ { b = $0; sub(/step: 2,/, "step: 1,", b); print b; print a; next }
	{ sub(/^- \{repeat: layers, steps: \[1, 6\], count: 3\}$/, "- {repeat: layers, steps: [2, 6], count: 3}"); print }' \
		c.yaml > moved.yaml
	grep -q '^- {repeat: layers, steps: \[2, 6\], count: 3}$' moved.yaml || fail "the repeat was not moved"
	grep -q '^- {step: 1, copy: parameter, op: mm, operand: b,' moved.yaml || fail "the weight copy was not moved"
	amp-expand moved.yaml | amp-exchange > x.yaml
	run amp-group x.yaml -o g.yaml
	assert_success
	run grep -c '^- {phase: ' g.yaml
	assert_output 4
	grep -q '^- {phase: 0, steps: \[1, 1\], label: mm.b}$' g.yaml || fail "$(grep '^- {phase' g.yaml)"
	grep -q '^- {phase: 1, steps: \[2, 2\], label: mm.a}$' g.yaml || fail "$(grep '^- {phase' g.yaml)"
	run amp-emit --no-model g.yaml -o p.amp
	assert_success
	run --separate-stderr amp-run p.amp
	assert_success
	assert_line --index 0 'movement: byte-exact after every phase (4 phases)'
}
