#!/usr/bin/env bats
# The README as an entry point: at most 150 lines, every file it names
# exists, and the tool reference it leaves out is in the man pages
# (man/amp-TOOL.h2m, included by help2man).

bats_require_minimum_version 1.5.0
load common

@test "docs: README is at most 150 lines and names only files that exist" {
	run wc -l <"$ROOT/README.md"
	[ "$output" -le 150 ] || fail "README.md has $output lines"
	local f missing=""
	while read -r f; do
		[ -e "$ROOT/$f" ] || missing+=" $f"
	done < <(grep -oE '\((formats|docs)/[a-z0-9.-]+\)|(docs|formats|bench)/[a-z0-9.-]+\.(md|sh|png)' "$ROOT/README.md" |
		tr -d '()' | sort -u)
	[ -z "$missing" ] || fail "README.md names missing files:$missing"
}

@test "docs: every tool has its man page details, and help2man includes them" {
	command -v help2man >/dev/null || skip "help2man is not installed (make deps installs it)"
	local t
	for t in amp-plan amp-compose amp-expand amp-exchange amp-group amp-emit amp-capture amp-run amp-compare amp-sweep amp-import; do
		[ -s "$ROOT/man/$t.h2m" ] || fail "no man/$t.h2m"
		grep -q '^\[DETAILS\]$' "$ROOT/man/$t.h2m" || fail "man/$t.h2m has no DETAILS section"
	done
	make -C "$ROOT" --no-print-directory MAN_DIR="$BATS_TEST_TMPDIR/man" "$BATS_TEST_TMPDIR/man/amp-capture.1" >/dev/null
	grep -q '^\.SH DETAILS' "$BATS_TEST_TMPDIR/man/amp-capture.1" || fail "the page has no DETAILS"
	grep -q 'trace' "$BATS_TEST_TMPDIR/man/amp-capture.1" || fail "the page lacks --trace"
}
