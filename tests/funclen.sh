#!/usr/bin/env bash
# tests/funclen.sh [ROOT [MAX]]: no function of lib/ or tools/ (their .c
# and .h files) is longer than MAX lines (150 by default; issue 47). A
# function's length counts its body from the `{` to the `}`, both
# included.
#
# It relies on the tree's layout, which it also checks: a function's
# signature starts at column 0 (the return type's line), and its body's
# `{` and `}` each stand alone at column 0. A signature line at column 0
# that ends with `) {`, or a body whose `}` never comes at column 0, is an
# offence too, so the count cannot be dodged by another layout.
# (A one-line function, `int f(void) { return 1; }`, is short by shape.)
#
# Prints one line per offence, `lib/lower/program_file.c:331: read_mem is
# 204 lines (more than 150)`, and exits 1 when there is any; otherwise one
# line saying how many functions it read and the longest.
set -euo pipefail
root=${1:-.}
max=${2:-150}
case $max in '' | *[!0-9]*) echo "funclen: MAX must be a count of lines, not '$max'" >&2; exit 2 ;; esac
[ -d "$root/lib" ] || { echo "funclen: $root/lib: no such directory" >&2; exit 1; }
dirs=lib
[ -d "$root/tools" ] && dirs="lib tools"

# shellcheck disable=SC2086 # two folder names
out=$(cd "$root" && find $dirs -name '*.[ch]' | LC_ALL=C sort | xargs awk -v max="$max" '
	function close_file() {
		if (inb)
			printf "%s:%d: %s has no closing } at column 0\n", fname, at, name
		inb = 0; nsig = 0
	}
	FNR == 1 { if (NR > 1) close_file(); fname = FILENAME }
	# the body opens: the function is named by the signature gathered above
	/^\{/ {
		if (inb)
			printf "%s:%d: %s has no closing } at column 0 before the { of line %d\n", FILENAME, at, name, FNR
		# the name, or a macro that makes it (GK(strip_tile)), on the
		# first line of the signature that has one
		name = "?"; at = FNR
		for (k = 1; k <= nsig; k++) {
			line = sig[k]
			gsub(/__attribute__[ \t]*\(\([^)]*\)\)/, "", line)
			if (match(line, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(([A-Za-z_][A-Za-z0-9_]*\)[ \t]*\()?/)) {
				name = substr(line, RSTART, RLENGTH - 1); sub(/[ \t]+$/, "", name)
				at = sigat[k]
				break
			}
		}
		body = FNR; inb = 1; nsig = 0
		next
	}
	/^\}/ {
		if (inb) {
			len = FNR - body + 1; nfn++
			if (len > longest) { longest = len; lname = name }
			if (len > max) printf "%s:%d: %s is %d lines (more than %d)\n", FILENAME, at, name, len, max
			inb = 0
		}
		nsig = 0
		next
	}
	inb { next }
	# outside a body: gather a signature, which may run over lines and
	# ends no declaration, comment or one-line function
	/^[ \t]*$/ || /^#/ || /;[ \t]*$/ || /\*\/[ \t]*$/ || /\}[ \t]*$/ { nsig = 0; next }
	/^[A-Za-z_].*\)[ \t]*\{[ \t]*$/ && !/=/ {
		printf "%s:%d: the body opens on the signature line (the check needs its { alone at column 0)\n", FILENAME, FNR
		next
	}
	nsig || /^[A-Za-z_]/ { sig[++nsig] = $0; sigat[nsig] = FNR }
	END {
		close_file()
		printf "funclen: %d functions in %s, the longest %s (%d lines)\n", nfn, "'"$dirs"'", lname, longest
	}')
summary=$(printf '%s\n' "$out" | tail -n 1)
offences=$(printf '%s\n' "$out" | sed '$d')
if [ -n "$offences" ]; then
	printf '%s\n' "$offences"
	exit 1
fi
echo "$summary; none over $max lines"
