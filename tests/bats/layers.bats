#!/usr/bin/env bats
# The layers of lib/ (lib/LAYERS), checked by tests/layers.sh: on the real
# tree (its includes, and its objects' symbols under AMP_OBJ), and on
# copies with an offence planted in each way the check must catch.

bats_require_minimum_version 1.5.0
load common

: "${AMP_OBJ:=$ROOT/build/rel}"

# plant_tree: a copy of lib/ (sources only) in ./tree.
plant_tree() {
	mkdir -p tree
	cp -r "$ROOT/lib" tree/lib
}

@test "layers: lib/ has no upward include or call, and no circle" {
	[ -d "$AMP_OBJ/lib" ] || fail "no objects under $AMP_OBJ/lib (make first)"
	run bash "$ROOT/tests/layers.sh" "$ROOT" "$AMP_OBJ"
	[ "$status" -eq 0 ] || fail "$output"
	[[ $output == "layers: 9 layers; no upward include or call, no circle" ]]
}

@test "layers: a planted upward include is refused, naming its file and line" {
	plant_tree
	local n
	n=$(grep -n '^#include "base/diag.h"' tree/lib/base/diag.c | cut -d: -f1)
	sed -i "${n}a #include \"run/run.h\"" tree/lib/base/diag.c
	run bash "$ROOT/tests/layers.sh" tree /nonexistent
	[ "$status" -eq 1 ]
	[[ $output == *"lib/base/diag.c:$((n + 1)): #include \"run/run.h\" reaches up from base to run (base may include only base)"* ]] ||
		fail "$output"
}

@test "layers: an include that does not name its layer, and a folder that is no layer, are refused" {
	plant_tree
	echo '#include "plan.h"' >> tree/lib/lower/compose.c
	mkdir tree/lib/misc && echo 'int misc;' > tree/lib/misc/misc.c
	run bash "$ROOT/tests/layers.sh" tree /nonexistent
	[ "$status" -eq 1 ]
	[[ $output == *'lib/lower/compose.c:'*': #include "plan.h" does not name its layer ("LAYER/plan.h")'* ]] || fail "$output"
	[[ $output == *"lib/misc/misc.c: lib/misc/ is not a layer of lib/LAYERS"* ]] || fail "$output"
}

@test "layers: a planted circle and an upward call are found in the objects" {
	mkdir -p tree/lib/base tree/lib/stage tree/obj/lib/base tree/obj/lib/stage
	printf 'base\nstage\n' > tree/lib/LAYERS
	# a.c and b.c call each other; c.c (base) calls up into stage.
	printf 'int amp_b(int);\nint amp_a(int n) { return n ? amp_b(n - 1) : 0; }\n' > tree/lib/base/a.c
	printf 'int amp_a(int);\nint amp_b(int n) { return n ? amp_a(n - 1) : 1; }\n' > tree/lib/base/b.c
	printf 'int amp_s(void);\nint amp_c(void) { return amp_s(); }\n' > tree/lib/base/c.c
	printf 'int amp_s(void) { return 2; }\n' > tree/lib/stage/s.c
	for f in base/a base/b base/c stage/s; do
		cc -c -o "tree/obj/lib/$f.o" "tree/lib/$f.c"
	done
	run bash "$ROOT/tests/layers.sh" tree tree/obj
	[ "$status" -eq 1 ]
	[[ $output == *"circle: lib/base/a.c -(amp_b)-> lib/base/b.c -(amp_a)-> lib/base/a.c"* ]] || fail "$output"
	[[ $output == *"lib/base/c.c: calls amp_s, defined in lib/stage/s.c: a higher layer (stage above base)"* ]] ||
		fail "$output"
	# Mended, the same tree passes.
	printf 'int amp_b(int n) { return n; }\n' > tree/lib/base/b.c
	printf 'int amp_c(void) { return 2; }\n' > tree/lib/base/c.c
	cc -c -o tree/obj/lib/base/b.o tree/lib/base/b.c
	cc -c -o tree/obj/lib/base/c.o tree/lib/base/c.c
	run bash "$ROOT/tests/layers.sh" tree tree/obj
	[ "$status" -eq 0 ] || fail "$output"
}

@test "layers: a circle between the tools' shared files is found; their calls into lib/ are no upward call" {
	mkdir -p tree/lib/base tree/obj/lib/base tree/tools tree/obj/tools
	printf 'base\n' > tree/lib/LAYERS
	printf 'int amp_d(void) { return 1; }\n' > tree/lib/base/d.c
	printf 'int amp_p(int);\nint amp_d(void);\nint amp_o(int n) { return n ? amp_p(n - 1) : amp_d(); }\n' > tree/tools/o.c
	printf 'int amp_o(int);\nint amp_p(int n) { return n ? amp_o(n - 1) : 0; }\n' > tree/tools/p.c
	cc -c -o tree/obj/lib/base/d.o tree/lib/base/d.c
	cc -c -o tree/obj/tools/o.o tree/tools/o.c
	cc -c -o tree/obj/tools/p.o tree/tools/p.c
	run bash "$ROOT/tests/layers.sh" tree tree/obj
	[ "$status" -eq 1 ]
	[[ $output == *"circle: tools/o.c -(amp_p)-> tools/p.c -(amp_o)-> tools/o.c"* ]] || fail "$output"
	[[ $output != *"higher layer"* ]] || fail "$output"
	printf 'int amp_p(int n) { return n; }\n' > tree/tools/p.c
	cc -c -o tree/obj/tools/p.o tree/tools/p.c
	run bash "$ROOT/tests/layers.sh" tree tree/obj
	[ "$status" -eq 0 ] || fail "$output"
}
