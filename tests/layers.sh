#!/usr/bin/env bash
# tests/layers.sh [ROOT [OBJDIR]]: the layer check of lib/ (lib/LAYERS).
#
#   1. Includes: every #include "..." of lib/LAYER/FILE names its layer
#      (`#include "stage/plan.h"`), and that layer is LAYER or one listed
#      before it in lib/LAYERS.
#   2. Calls, from the objects' symbols (nm) under OBJDIR/lib/ and
#      OBJDIR/tools/ (the tools' shared files): no object of lib/ uses a
#      symbol defined by an object of a higher layer, and no set of
#      objects, tools/ included, depends on itself (a circle: a.c -> b.c
#      -> a.c).
#
# Prints one line per offence (file:line for includes) and exits 1 when
# there is any. ROOT defaults to the current directory, OBJDIR to
# ROOT/build/rel; step 2 is skipped, with a note, when OBJDIR has no
# objects.
set -euo pipefail
root=${1:-.}
obj=${2:-$root/build/rel}
layers=$root/lib/LAYERS
[ -f "$layers" ] || { echo "layers: $layers: no such file" >&2; exit 1; }
order=$(awk '!/^#/ && NF { print $1 }' "$layers")
bad=0

# Every file of lib/ sits in a listed layer (one awk over the list: a
# process per file is most of the check's time).
out=$(cd "$root" && find lib -name '*.[ch]' | sort | awk -v order="$(echo $order)" '
	BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) rank[o[i]] = i }
	{
		rel = substr($0, 5); d = rel; sub(/\/.*/, "", d)
		if (d == rel) printf "lib/%s: not in a layer folder (lib/LAYER/%s; layers: %s)\n", rel, rel, order
		else if (!(d in rank)) printf "lib/%s: lib/%s/ is not a layer of lib/LAYERS\n", rel, d
	}')
[ -z "$out" ] || { echo "$out"; bad=1; }

# 1. Includes.
out=$(cd "$root" && find lib -name '*.[ch]' | sort | xargs awk -v order="$(echo $order)" '
	BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) rank[o[i]] = i }
	/^[ \t]*#[ \t]*include[ \t]*"/ {
		split(FILENAME, p, "/"); me = p[2]
		h = $0; sub(/^[^"]*"/, "", h); sub(/".*/, "", h)
		if (h !~ /\//) {
			printf "%s:%d: #include \"%s\" does not name its layer (\"LAYER/%s\")\n", FILENAME, FNR, h, h
			next
		}
		l = h; sub(/\/.*/, "", l)
		if (!(l in rank)) {
			printf "%s:%d: #include \"%s\": %s is not a layer of lib/LAYERS\n", FILENAME, FNR, h, l
		} else if (me in rank && rank[l] > rank[me]) {
			allowed = ""
			for (i = 1; i <= rank[me]; i++) allowed = allowed (i > 1 ? ", " : "") o[i]
			printf "%s:%d: #include \"%s\" reaches up from %s to %s (%s may include only %s)\n", \
				FILENAME, FNR, h, me, l, me, allowed
		}
	}')
[ -z "$out" ] || { echo "$out"; bad=1; }

# 2. Calls and circles, from the objects.
objs=$(cd "$obj" 2>/dev/null && find lib tools -name '*.o' 2>/dev/null | sort || true)
if [ -z "$objs" ]; then
	echo "layers: no objects under $obj/lib; calls and circles not checked" >&2
else
	# (nm -A names each symbol's object: one nm for all definitions, one
	# for all uses)
	out=$(cd "$obj" && {
		nm -A -g --defined-only $objs | awk '{ f = $1; sub(/:[^:]*$/, "", f); sub(/\.o$/, ".c", f) }
			NF == 3 && $2 ~ /[TDBRC]/ { print "D", $3, f }'
		nm -A -u $objs | awk '{ f = $1; sub(/:$/, "", f); sub(/\.o$/, ".c", f); print "U", $3, f }'
	} | awk -v order="$(echo $order)" '
		BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) rank[o[i]] = i }
		function layer(f,  p) { split(f, p, "/"); return p[2] }
		$1 == "D" { def[$2] = $3; next }
		{ use[++nu] = $2; user[nu] = $3 }
		END {
			for (i = 1; i <= nu; i++) {
				d = def[use[i]]
				if (d == "" || d == user[i]) continue
				# tools/ (their shared objects) sit above every layer:
				# only circles are checked among them
				if (user[i] !~ /^tools\// && d !~ /^tools\// && rank[layer(d)] > rank[layer(user[i])])
					printf "%s: calls %s, defined in %s: a higher layer (%s above %s)\n", \
						user[i], use[i], d, layer(d), layer(user[i])
				k = user[i] SUBSEP d
				if (!(k in edge)) { edge[k] = use[i]; out[user[i]] = out[user[i]] " " d; node[user[i]]; node[d] }
			}
			# A file lies on a circle when it reaches itself. Each
			# circle (the files that reach each other) is printed
			# once: its shortest loop through its first file, and
			# every file on it.
			for (v in node) {
				delete q; delete mark; qh = 1; qt = 0
				m = split(out[v], w, " ")
				for (j = 1; j <= m; j++) if (!(w[j] in mark)) { mark[w[j]]; q[++qt] = w[j] }
				while (qh <= qt) {
					x = q[qh++]; R[v, x] = 1
					m = split(out[x], w, " ")
					for (j = 1; j <= m; j++) if (!(w[j] in mark)) { mark[w[j]]; q[++qt] = w[j] }
				}
			}
			for (v in node) {
				if (!((v, v) in R) || (v in covered)) continue
				delete members; first = v; all = ""
				for (x in node) if ((v, x) in R && (x, v) in R) { members[x]; covered[x]; if (x < first) first = x }
				for (x in members) all = all " " x
				# Shortest loop from first back to itself, inside the circle.
				delete par; delete q; qh = 1; qt = 0; q[++qt] = first; found = 0
				while (qh <= qt && !found) {
					x = q[qh++]
					m = split(out[x], w, " ")
					for (j = 1; j <= m && !found; j++) {
						y = w[j]
						if (!(y in members)) continue
						if (y == first) { par[first] = x; found = 1 }
						else if (!(y in par)) { par[y] = x; q[++qt] = y }
					}
				}
				path = first; y = first
				do { x = par[y]; path = x " -(" edge[x SUBSEP y] ")-> " path; y = x } while (y != first)
				printf "circle: %s   (files on it:%s)\n", path, all
			}
		}' | sort)
	[ -z "$out" ] || { echo "$out"; bad=1; }
fi
[ "$bad" = 0 ] && echo "layers: $(echo $order | wc -w) layers; no upward include or call, no circle"
exit $bad
