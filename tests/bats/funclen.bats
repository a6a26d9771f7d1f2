#!/usr/bin/env bats
# No function of lib/ or tools/ over 150 lines (issue 47), checked by
# tests/funclen.sh: on the real tree, and on copies with a long function
# planted, and with the layouts the check relies on broken.

bats_require_minimum_version 1.5.0
load common

# plant_tree: a copy of lib/ and tools/ (sources only) in ./tree.
plant_tree() {
	mkdir -p tree
	cp -r "$ROOT/lib" "$ROOT/tools" tree/
}

# long_fn NAME BODY: a function NAME whose body, its { and } included, is
# BODY lines, on standard output.
long_fn() {
	printf '\nstatic int %s(int n)\n{\n' "$1"
	for ((i = 0; i < $2 - 3; i++)); do printf '\tn += %d;\n' "$i"; done
	printf '\treturn n;\n}\n'
}

@test "funclen: no function of lib/ or tools/ is over 150 lines" {
	run bash "$ROOT/tests/funclen.sh" "$ROOT"
	[ "$status" -eq 0 ] || fail "$output"
	[[ $output == "funclen: "*" functions in lib tools, the longest "*" lines); none over 150 lines" ]] ||
		fail "$output"
}

@test "funclen: a planted 151-line function is refused, naming its file, line, name and length; 150 lines pass" {
	plant_tree
	local n
	n=$(wc -l < tree/lib/base/diag.c)
	long_fn planted 150 >> tree/lib/base/diag.c
	run bash "$ROOT/tests/funclen.sh" tree
	[ "$status" -eq 0 ] || fail "$output"
	[[ $output == *"the longest "*"; none over 150 lines" ]] || fail "$output"
	cp "$ROOT/lib/base/diag.c" tree/lib/base/diag.c
	long_fn planted 151 >> tree/lib/base/diag.c
	long_fn tool_planted 200 >> tree/tools/tool.c
	run bash "$ROOT/tests/funclen.sh" tree
	[ "$status" -eq 1 ]
	[[ $output == *"lib/base/diag.c:$((n + 2)): planted is 151 lines (more than 150)"* ]] || fail "$output"
	[[ $output == *"tools/tool.c:"*": tool_planted is 200 lines (more than 150)"* ]] || fail "$output"
	[ "${#lines[@]}" -eq 2 ] || fail "$output"
}

@test "funclen: a signature over lines, with an attribute or a macro for its name, names the function" {
	mkdir -p tree/lib/base
	{
		echo '__attribute__((format(printf, 1, 2)))'
		echo 'void say(const char *fmt,'
		echo '         ...)'
		echo '{'
		echo '}'
		echo 'static inline __attribute__((always_inline)) void GK(strip)(int a,'
		echo '							  int b)'
		echo '{'
		echo '	(void)a, (void)b;'
		echo '}'
	} > tree/lib/base/a.c
	run bash "$ROOT/tests/funclen.sh" tree 2
	[ "$status" -eq 1 ]
	[[ $output == "lib/base/a.c:6: GK(strip) is 3 lines (more than 2)" ]] || fail "$output"
	run bash "$ROOT/tests/funclen.sh" tree 1
	[ "$status" -eq 1 ]
	[[ $output == *"lib/base/a.c:2: say is 2 lines (more than 1)"* ]] || fail "$output"
}

@test "funclen: a body opened on its signature line, or never closed at column 0, is refused" {
	mkdir -p tree/lib/base
	printf 'int f(void) {\n\treturn 1;\n}\n' > tree/lib/base/a.c
	printf 'int g(void)\n{\n\treturn 1;\n  }\n' > tree/lib/base/b.c
	run bash "$ROOT/tests/funclen.sh" tree
	[ "$status" -eq 1 ]
	[[ $output == *"lib/base/a.c:1: the body opens on the signature line (the check needs its { alone at column 0)"* ]] ||
		fail "$output"
	[[ $output == *"lib/base/b.c:1: g has no closing } at column 0"* ]] || fail "$output"
}
