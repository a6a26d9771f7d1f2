#!/usr/bin/env bats
# Packaging: make install into a private PREFIX, a relocated installation
# that still finds its machines, the man pages, bash completion, make help,
# and the machine files in share/machines.

load common
bats_require_minimum_version 1.5.0

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	private_bin
}

@test "make install puts the tools, share/amp, man pages and completion under PREFIX; moved, it still finds its machine" {
	run make -C "$ROOT" --no-print-directory -s install "${SAN_ARG[@]}" BIN="$BIN" PREFIX="$BATS_TEST_TMPDIR/p"
	assert_success
	local t p=$BATS_TEST_TMPDIR/p
	for t in amp-plan amp-compose amp-expand amp-exchange amp-group amp-emit amp-capture amp-run amp-compare amp-sweep amp-import; do
		assert [ -x "$p/bin/$t" ]
		assert [ -s "$p/share/man/man1/$t.1" ]
		run grep -c "^\.TH ${t^^} \"1\"" "$p/share/man/man1/$t.1"
		assert_output 1
		assert [ -s "$p/share/bash-completion/completions/$t" ]
	done
	assert [ -s "$p/share/amp/machines/amp1472.yaml" ]
	assert [ -s "$p/share/amp/jq/phase-table.jq" ]
	# formats/ and docs/ in share/doc/amp, where --help and the man pages send the reader
	local f
	for f in "$ROOT"/formats/*.md "$ROOT"/docs/*.md; do
		cmp "$f" "$p/share/doc/amp/${f#"$ROOT"/}" || fail "share/doc/amp lacks ${f#"$ROOT"/}"
	done
	run "$p/bin/amp-plan" --help
	assert_line 'PREFIX/share/doc/amp/formats/X.md and PREFIX/share/doc/amp/docs/X.md.'
	for t in amp-plan amp-capture amp-compare amp-sweep; do
		grep -q 'PREFIX/share/doc/amp/formats/X\.md' "$p/share/man/man1/$t.1" || fail "$t.1 does not cite share/doc/amp"
	done
	# every option of --help is in the man page
	run bash -c "'$p/bin/amp-emit' --help | grep -oE -- '--[a-z][a-z-]+' | sort -u"
	local o
	for o in "${lines[@]}"; do
		grep -q -- "${o//-/\\\\-}" "$p/share/man/man1/amp-emit.1" || fail "amp-emit.1 lacks $o"
	done
	# moved elsewhere, with no AMP_SHARE and the source tree out of reach by
	# name: the default machine is the installation's own (renamed here)
	sed -i 's/^name: amp1472 /name: moved   /' "$p/share/amp/machines/amp1472.yaml"
	mv "$p" "$BATS_TEST_TMPDIR/q"
	AMP_SHARE= run --separate-stderr "$BATS_TEST_TMPDIR/q/bin/amp-plan" "$MODELS/tiny-mlp.yaml"
	assert_success
	assert_line --index 2 --regexp '^machine: \{name: moved, tiles: 1472,'
	run make -C "$ROOT" --no-print-directory -s uninstall PREFIX="$BATS_TEST_TMPDIR/q"
	assert_success
	run find "$BATS_TEST_TMPDIR/q" -type f
	assert_output ""
}

@test "make uninstall refuses to run without PREFIX on the command line, and removes nothing" {
	make -C "$ROOT" --no-print-directory -s install "${SAN_ARG[@]}" BIN="$BIN" PREFIX="$BATS_TEST_TMPDIR/p" >/dev/null
	local before
	before=$(find p | sort)
	# PREFIX from the environment or the default is not enough: it is the
	# default directory a bare `make uninstall` would have emptied
	PREFIX=$BATS_TEST_TMPDIR/p run --separate-stderr make -C "$ROOT" --no-print-directory -s uninstall \
		DESTDIR="$BATS_TEST_TMPDIR/p"
	assert_failure 2
	[[ $stderr == "make uninstall: name the installation to remove: make uninstall PREFIX=DIR "* ]] || fail "$stderr"
	# (DESTDIR keeps a regression from emptying this host's /usr/local)
	run --separate-stderr make -C "$ROOT" --no-print-directory -s uninstall DESTDIR="$BATS_TEST_TMPDIR/none"
	assert_failure 2
	[[ $stderr == "make uninstall: name the installation to remove"* ]] || fail "$stderr"
	assert_equal "$(find p | sort)" "$before"
	run make -C "$ROOT" --no-print-directory -s uninstall PREFIX="$BATS_TEST_TMPDIR/p"
	assert_success
	[ ! -e p/share/doc/amp ] && [ ! -e p/share/amp ] || fail "uninstall left share/amp or share/doc/amp"
}

@test "bash completion offers a tool's options from its option table (--list-options), and the values of --objective" {
	run bash -c "PATH='$BIN':\$PATH; source '$ROOT/share/bash-completion/amp'
		COMP_WORDS=(amp-plan --ob); COMP_CWORD=1; _amp_tool; echo \"\${COMPREPLY[*]}\"
		COMP_WORDS=(amp-plan --objective c); COMP_CWORD=2; _amp_tool; echo \"\${COMPREPLY[*]}\"
		COMP_WORDS=(amp-emit --); COMP_CWORD=1; _amp_tool; echo \"\${COMPREPLY[*]}\""
	assert_success
	assert_line --index 0 '--objective'
	assert_line --index 1 'cycles capacity capacity+tables'
	local o
	for o in --table-budget --fragment-limit --sram-limit --report --model --scales --list --output; do
		[[ ${lines[2]} == *"$o"* ]] || fail "amp-emit completion lacks $o: ${lines[2]}"
	done
}

@test "bash completion offers amp-plan only its own options, amp-sweep its commands, --machine the machine names" {
	mkdir -p work && : > work/amp9.yaml && mkdir jobdir
	# the binaries in the tree (private_bin's copies have no share/ beside
	# them, nor has build/san/bin: then AMP_SHARE names it)
	[ -d "$AMP_BIN/../share/machines" ] || export AMP_SHARE=$ROOT/share
	run bash -c "cd work; PATH='$AMP_BIN':\$PATH; source '$ROOT/share/bash-completion/amp'
		c() { COMP_WORDS=(\"\$@\"); COMP_CWORD=\$((\$# - 1)); _amp_tool; echo \"\${COMPREPLY[*]}\"; }
		c amp-plan --c
		c amp-plan --
		c amp-run --c
		c amp-sweep ''
		c amp-sweep m
		c amp-sweep merge --
		c amp-sweep -o x p
		c amp-plan --machine ''
		c amp-emit -m amp7
		AMP_SHARE='$ROOT/share' c amp-capture --machine amp1
		c amp-sweep jobs -o study ''"
	assert_success
	assert_line --index 0 '--compress'
	[[ ${lines[1]} != *--calibrate* ]] || fail "amp-plan offers amp-run's --calibrate: ${lines[1]}"
	[[ ${lines[1]} == *--machine* && ${lines[1]} == *--explain* ]] || fail "amp-plan's options: ${lines[1]}"
	assert_line --index 2 '--calibrate'
	assert_line --index 3 'jobs run merge plot'
	assert_line --index 4 'merge'
	[[ ${lines[5]} == *--rank* && ${lines[5]} == *--json* && ${lines[5]} != *-j\ * ]] || fail "merge's options: ${lines[5]}"
	assert_line --index 6 'plot'
	assert_line --index 7 'amp1472 amp1472x2 amp1472x4 amp5888 amp736 m2000 amp9.yaml'
	assert_line --index 8 'amp736'
	assert_line --index 9 'amp1472 amp1472x2 amp1472x4'
	assert_line --index 10 'amp9.yaml'
}

@test "make help lists the main targets" {
	run make -C "$ROOT" --no-print-directory -s help
	assert_success
	local t
	for t in check demo capture validate experiment-weights install uninstall fuzz-status man regen; do
		assert_line --regexp "^make [^ ]*\b$t\b"
	done
}

@test "the 736- and 5,888-tile machine files plan and emit siglip-mlp at their own limits" {
	local m
	for m in amp736 amp5888; do
		run --separate-stderr amp-plan --machine "$MACHINES/$m.yaml" -o "$m.plan" "$MODELS/siglip-mlp.yaml"
		assert_success
		run head -n 3 "$m.plan"
		assert_line --index 2 --regexp "^machine: \\{name: $m, tiles: ${m#amp},"
		run bash -c "set -o pipefail; amp-compose '$m.plan' | amp-expand | amp-exchange | amp-group |
			amp-emit --no-model -o '$m.amp'"
		assert_success
		assert [ -s "$m.amp" ]
	done
}
