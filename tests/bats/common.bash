# Loaded by every .bats file: the binaries under test on PATH, the Bats
# helper libraries, and a scratch directory per test.
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
: "${AMP_BIN:=$ROOT/bin}"
PATH="$AMP_BIN:$PATH"
MODELS=$ROOT/share/models
MACHINES=$ROOT/share/machines
BAD=$ROOT/tests/bad
GOLDEN=$ROOT/tests/golden

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
}

# siglip-mlp's lowering and capture take seconds, and minutes under
# AddressSanitizer; the sanitizer run (AMP_SAN set) leaves those tests to
# the plain run, which runs them all.
siglip_ok() {
	[ -z "${AMP_SAN:-}" ] || skip "siglip-mlp under the sanitizers: covered by the plain run"
}

# The fixed-string FILE as an extended regular expression.
re_quote() {
	printf '%s' "$1" | sed 's/[][\.*^$(){}?+|/]/\\&/g'
}

# plan_cycles MODEL [FLAG]...: the modelled cycles of MODEL's plan with
# FLAGs (amp-plan's), lowered as amp-group writes it and captured
plan_cycles() {
	local m=$1
	shift
	amp-plan "$@" "$m" | amp-compose | amp-expand | amp-exchange | amp-group | amp-capture | jq .summary.total_cycles
}

# plan_rejects FILE LINE:COL MESSAGE [ARG]...
# Runs `amp-plan -o out.plan ARG...` and checks the bad-input contract:
# exit 1, nothing on standard output, one line on standard error of the
# form `amp-plan: FILE:LINE:COL: ...MESSAGE...`, and neither out.plan nor a
# temporary left behind. LINE:COL is an extended regular expression.
plan_rejects() {
	local file=$1 at=$2 msg=$3 re left
	shift 3
	run --separate-stderr amp-plan -o out.plan "$@"
	assert_failure 1
	assert_equal "$output" ""
	re="^amp-plan: $(re_quote "$file"):($at): "
	[[ $stderr =~ $re ]] || fail "expected a message at $file:$at, got: $stderr"
	[[ $stderr == *"$msg"* ]] || fail "expected '$msg' in: $stderr"
	[[ $stderr != *$'\n'* ]] || fail "expected one line of message, got: $stderr"
	[[ ! -e out.plan ]] || fail "out.plan was written on failure"
	left=$(find . -name '*.tmp.*')
	[[ -z $left ]] || fail "temporary left behind: $left"
}

# private_bin: copies of the binaries under test in $BATS_TEST_TMPDIR/bin
# (mtimes kept) as BIN, and SAN_ARG for make: under `make check SAN=1`
# the binaries come from build/san/bin, so make compares them with the
# sanitizer build instead of rebuilding them. A test that touches a tool
# to make its stage stale makes no one else's artifacts stale.
private_bin() {
	mkdir -p "$BATS_TEST_TMPDIR/bin"
	cp -p "$AMP_BIN"/amp-* "$BATS_TEST_TMPDIR/bin/"
	BIN=$BATS_TEST_TMPDIR/bin
	SAN_ARG=()
	if [ "$AMP_BIN" -ef "$ROOT/build/san/bin" ]; then
		SAN_ARG=(SAN=1)
	fi
}

# no_prov FILE: a stage file (plain or zstd) or a capture without its
# provenance (formats/stage.md), which names the tools and options that
# made it; same_but_provenance A B: A and B equal but for it.
no_prov() {
	if [ "$(zstd -dcf -- "$1" | head -c 1)" = "{" ]; then
		zstd -dcf -- "$1" | jq 'del(.provenance)'
	else
		zstd -dcf -- "$1" | awk '/^provenance:/ { on = 1; next } on && /^- / { next } { on = 0; print }'
	fi
}
same_but_provenance() {
	diff <(no_prov "$1") <(no_prov "$2") >/dev/null || { echo "$1 and $2 differ beyond their provenance"; return 1; }
}

# every_bad_checked COUNT PATTERN FILE...: each FILE (a malformed model in
# tests/bad) is named in the running suite as PATTERN with %s its base
# name, and there are COUNT of them.
every_bad_checked() {
	local count=$1 pattern=$2 f n=0
	shift 2
	for f in "$@"; do
		# shellcheck disable=SC2059
		grep -qF "$(printf "$pattern" "$(basename "$f")")" "$BATS_TEST_FILENAME" || fail "$(basename "$f") is not checked"
		n=$((n + 1))
	done
	assert [ "$n" -eq "$count" ]
}

# program MODEL OUT: MODEL lowered by the stage tools (OUT.g: the grouped
# stage) and emitted, carrying the model, as the program OUT.
program() {
	amp-plan "$1" | amp-compose | amp-expand | amp-exchange | amp-group > "$2.g"
	amp-emit --model "$1" "$2.g" -o "$2"
}

# cosines_at_least MIN: every "cosine X," in $output is at least MIN, and
# there is one.
cosines_at_least() {
	local c n=0
	while read -r c; do
		awk -v c="$c" -v m="$1" 'BEGIN { exit !(c >= m) }' || fail "cosine $c below $1 in: $output"
		n=$((n + 1))
	done < <(printf '%s\n' "$output" | sed -n 's/.*: cosine \([0-9.]*\),.*/\1/p')
	[ "$n" -gt 0 ] || fail "no cosine in: $output"
}

# pin_home MODEL OUT: MODEL with its attention 'attn' pinned to run on its
# state's home (kv_staging home), written to OUT.
pin_home() {
	{ cat "$1"; printf 'pins:\n  attn: {kv_staging: home}\n'; } > "$2"
}
