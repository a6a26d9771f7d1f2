# Loaded by the suites split into parts (through their tests/bats/*.bash):
# the files several parts need, made once per Bats run and copied into
# each part's own $BATS_FILE_TMPDIR, so that splitting a suite does not
# make its fixtures again in every part, and no part can change another's.

# fixture FILE RECIPE [ARG...]: $BATS_FILE_TMPDIR/FILE, the file that
# `RECIPE ARG... OUT` writes at OUT. The first part of the run to ask for
# it runs the recipe in a directory of its own under $BATS_RUN_TMPDIR
# (shared by every file of one `bats` run), under a lock, as files may run
# at once (bats -j); every part then copies it. The directory's key is the
# recipe's text (a function's definition), FILE, and each argument: a file
# by its base name and its bytes (the tools record only base names), any
# other by its text. So a file made by another fixture keys by its
# contents, and two suites share a fixture only when they make it with the
# same recipe on the same inputs. Arguments that are paths must be
# absolute; a recipe must not depend on functions that differ between
# suites.
fixture() {
	local name=$1 recipe=$2 key dir a
	shift 2
	key=$({
		declare -f "$recipe" || echo "$recipe"
		printf 'file %s\n' "$name"
		for a in "$@"; do
			if [ -f "$a" ]; then
				printf 'input %s ' "${a##*/}"
				sha256sum < "$a"
			else
				printf 'arg %s\n' "$a"
			fi
		done
	} | sha256sum | cut -c1-32)
	dir=$BATS_RUN_TMPDIR/fixtures/$key
	mkdir -p "$dir" || return 1
	{
		flock 9 || return 1
		if [ ! -e "$dir/.made" ]; then
			(cd "$dir" && "$recipe" "$@" "$dir/$name") || return 1
			touch "$dir/.made"
		fi
	} 9> "$dir/.lock"
	cp "$dir/$name" "$BATS_FILE_TMPDIR/$name"
}

# Recipes (OUT last, as fixture calls them):
# stage_on MACHINE MODEL OUT: stages.bash's `grouped MODEL OUT MACHINE`.
stage_on() {
	grouped "$2" "$3" "$1"
}

# written TOOL [ARG...] OUT: TOOL ARG... -o OUT.
written() {
	"$1" "${@:2:$# - 2}" -o "${!#}"
}

# listed STAGE OUT: amp-emit's listing of STAGE (or a program) into OUT.
listed() {
	amp-emit --list "$1" > "$2"
}
