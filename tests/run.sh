#!/usr/bin/env bash
# Runs every test: the C unit tests (UNIT_BINS) and the Bats suites in
# tests/bats/, and ends with one line "N passed, N failed" summing both.
# Exit status 1 when anything failed.
set -u
cd "$(dirname "$0")/.."
: "${AMP_BIN:?AMP_BIN must name the directory of the amp-* binaries}"
export AMP_BIN FUZZ="${FUZZ:-}"
pass=0 fail=0 skipped=0

# The unit tests run two at a time too (UNIT_JOBS), each into a file of
# its own; their results are read back in UNIT_BINS order.
ujobs=${UNIT_JOBS:-2} bjobs=${BATS_JOBS:-2}
for j in "$ujobs" "$bjobs"; do
	case $j in
	'' | *[!0-9]* | 0*) echo "run.sh: UNIT_JOBS and BATS_JOBS take a count of 1 or more, not '$j'" >&2; exit 2 ;;
	esac
done
utmp=$(mktemp -d) || exit 2
trap 'rm -rf "$utmp"' EXIT
n=0
for t in ${UNIT_BINS:-}; do
	n=$((n + 1))
	printf '%s\n' "$t" > "$utmp/$n.name"
done
seq 1 "$n" | xargs -r -P "$ujobs" -I{} sh -c '"$(cat "$1/$2.name")" > "$1/$2.out" 2>&1; echo $? > "$1/$2.rc"' _ "$utmp" {}

i=0
for t in ${UNIT_BINS:-}; do
	i=$((i + 1))
	out=$(cat "$utmp/$i.out" 2>/dev/null); rc=$(cat "$utmp/$i.rc" 2>/dev/null)
	case $rc in '' | *[!0-9]*) rc=1 ;; esac          # it did not finish: a failure
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
	if [ -z "$line" ]; then
		printf '%s\n' "$out" | tail -n 20
		echo "FAIL $t: exited $rc without a summary"
		fail=$((fail + 1))
		continue
	fi
	p=${line%% passed*}; f=${line#*, }; f=${f%% failed}
	pass=$((pass + p)); fail=$((fail + f))
	if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
		printf '%s\n' "$out" | grep -v -E '^[0-9]+ passed' | tail -n 40
		[ "$f" -eq 0 ] && fail=$((fail + 1))
		echo "FAIL $t: $line (exit $rc)"
	else
		echo "ok   $t: $line"
	fi
done

if ls tests/bats/*.bats >/dev/null 2>&1; then
	# Files run two at a time (BATS_JOBS; GNU parallel), each file's tests in
	# order: every test works in its own directory, and the tests that run
	# make in the tree name their own binaries and artifacts.
	if [ "$bjobs" -gt 1 ] && command -v parallel >/dev/null; then
		tap=$(bats --tap --jobs "$bjobs" --no-parallelize-within-files tests/bats 2>&1)
	else
		tap=$(bats --tap tests/bats 2>&1)
	fi
	bs=$(printf '%s\n' "$tap" | grep -c '^ok .* # skip')
	bp=$(( $(printf '%s\n' "$tap" | grep -c '^ok ') - bs ))
	bf=$(printf '%s\n' "$tap" | grep -c '^not ok ')
	printf '%s\n' "$tap" | awk '/^not ok /{show=1} /^ok /{show=0} show'
	echo "bats: $bp passed, $bf failed, $bs skipped"
	pass=$((pass + bp)); fail=$((fail + bf)); skipped=$((skipped + bs))
	if ! printf '%s\n' "$tap" | grep -q '^1\.\.'; then
		echo "FAIL bats: no test plan (did bats run?)"
		fail=$((fail + 1))
	fi
fi

if [ "$skipped" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skipped skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
