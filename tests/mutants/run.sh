#!/usr/bin/env bash
# make mutate: the mutation harness. Each mutant of tests/mutants/mutants.tsv
# weakens one check or one figure; a test must fail for it. For each, in a
# scratch copy of the tree (never this one): apply it, build, run the tests
# its line names, and when those all pass, `make check` (unless
# MUTATE_FULL=0). It is killed by the first test that fails, survives when
# none does. An equivalent mutant (the code cannot behave differently; its
# reason in the list) is listed and not run. Prints one line per mutant and
# the score: killed of the non-equivalent ones. Exit 1 when one survived or
# a mutant no longer applies (or no longer builds).
#
#   MUTATE_SET=NAME   only the mutants of that set (the list's second column)
#   MUTATE_ONLY="ID..." only those mutants
#   MUTATE_FULL=0     no `make check` for a survivor of its own tests
#   MUTATE_FIRST=1    only the first test a mutant names (CI's fast subset)
#   MUTATE_KEEP=DIR   work in DIR (kept) instead of a temporary directory
#
# List format (tests/mutants/README.md): one mutant per line, tab-separated:
# id, set, file, the text before (exactly once in the file, on one line),
# the text after, the tests (unit:test_NAME or bats:FILE.bats, space
# separated), and what the mutant means ("equivalent: why" for one that
# cannot change behaviour).
set -euo pipefail
export LC_ALL=C
# bash reads a script as it runs it: run from a copy, so that editing this
# file meanwhile changes nothing
if [ -z "${MUTATE_SELF:-}" ]; then
	self=$(mktemp "${TMPDIR:-/tmp}/amp-mutate-run.XXXXXX")
	cp "$0" "$self"
	MUTATE_SELF=$self MUTATE_ROOT=$(cd "$(dirname "$0")/../.." && pwd) exec bash "$self" "$@"
fi
rm -f "$MUTATE_SELF"
root=$MUTATE_ROOT
list=$root/tests/mutants/mutants.tsv
only_set=${MUTATE_SET:-} only_id=${MUTATE_ONLY:-} full=${MUTATE_FULL:-1} first=${MUTATE_FIRST:-0}
if [ -n "${MUTATE_KEEP:-}" ]; then
	work=$MUTATE_KEEP
	mkdir -p "$work"
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/amp-mutate.XXXXXX")
	trap 'rm -rf "$work"' EXIT
fi
# the tree as it stands (tracked and new files, with uncommitted changes)
(cd "$root" && git ls-files -z -c -o --exclude-standard | tar --null -T - -cf -) | tar -C "$work" -xf -
cd "$work"
log=$work/mutate.log
: > "$log"
make -s -j2 all > "$log" 2>&1 || { echo "mutate: the unmutated tree does not build (see $log)" >&2; exit 1; }

# unit:NAME / bats:FILE: 0 when the test passes
run_test() {
	case $1 in
	unit:*) make -s "build/rel/tests/${1#unit:}" >> "$log" 2>&1 && "build/rel/tests/${1#unit:}" >> "$log" 2>&1 ;;
	bats:*) bats -j 2 "tests/bats/${1#bats:}" >> "$log" 2>&1 ;;
	*) echo "mutate: unknown test '$1'" >&2; return 2 ;;
	esac
}

n=0 killed=0 survived=0 equivalent=0 stale=0 start=$SECONDS
while IFS=$'\t' read -r id set file before after tests meaning; do
	[[ -z $id || $id == \#* ]] && continue
	[ -z "$only_set" ] || [ "$set" = "$only_set" ] || continue
	[ -z "$only_id" ] || [[ " $only_id " == *" $id "* ]] || continue
	if [[ $meaning == equivalent:* ]]; then
		equivalent=$((equivalent + 1))
		printf '%-28s equivalent  (%s)\n' "$id" "${meaning#equivalent: }"
		continue
	fi
	n=$((n + 1))
	count=$(BEFORE=$before perl -0777 -ne 'print scalar(() = /\Q$ENV{BEFORE}\E/g)' "$file")
	if [ "$count" != 1 ]; then
		stale=$((stale + 1))
		printf '%-28s STALE       (%s: the text before occurs %s times)\n' "$id" "$file" "$count"
		continue
	fi
	cp "$file" "$work/orig"
	BEFORE=$before AFTER=$after perl -0777 -pi -e 's/\Q$ENV{BEFORE}\E/$ENV{AFTER}/' "$file"
	t0=$SECONDS by=
	if ! make -s -j2 all >> "$log" 2>&1; then
		cp "$work/orig" "$file"
		stale=$((stale + 1))
		printf '%-28s INVALID     (it does not build: fix the list)\n' "$id"
		continue
	else
		for t in $tests; do
			run_test "$t" || { by=$t; break; }
			[ "$first" = 0 ] || break
		done
		if [ -z "$by" ] && [ "$full" = 1 ]; then
			make check >> "$log" 2>&1 || by="make check"
		fi
	fi
	cp "$work/orig" "$file"         # a new mtime: the next build rebuilds it
	if [ -n "$by" ]; then
		killed=$((killed + 1))
		printf '%-28s killed      by %s (%ds)\n' "$id" "$by" $((SECONDS - t0))
	else
		survived=$((survived + 1))
		printf '%-28s SURVIVED    %s:%s (%s)\n' "$id" "$file" "$meaning" "$tests"
	fi
done < "$list"
make -s -j2 all >> "$log" 2>&1 || true
run=$((n - stale))
printf 'mutate: %d of %d mutants killed (%s%%), %d survived, %d stale or invalid, %d equivalent listed; %d s\n' \
	"$killed" "$run" "$( [ "$run" -gt 0 ] && echo $((100 * killed / run)) || echo -)" "$survived" "$stale" \
	"$equivalent" $((SECONDS - start))
[ "$survived" = 0 ] && [ "$stale" = 0 ]
