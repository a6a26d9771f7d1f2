# stepfields.awk (tests/bats/stepfields.bats): the one-field mutations of a
# grouped stage's compute steps and GEMM records. With -v want=0 it lists
# them, one a line: number, the op, the stage line it edits, the field.
# With -v want=N it prints the stage with mutation N made: the step's last
# operand dropped (two or more), its first read once more, an attribute
# changed (doubled; causal flipped; first -1 to 2), or a GEMM record's m,
# k or n doubled, its format swapped, its grid's rows and columns swapped
# (or, when equal, its rows and k: the same tiles) or its cast order
# (early, late) swapped.
function mutant(op, field, new) {
	n++
	if (!want)
		print n "\t" op "\t" NR "\t" field
	else if (n == want)
		line[NR] = new
}
BEGIN {
	na = split("eps heads kv_heads causal scale head_dim theta chunks first scratch", attr, " ")
	ng = split("m k n format", gf, " ")
}
{ line[NR] = $0 }
/^- \{step: [0-9]+, compute: / {
	match($0, / op: [^,]+,/); op = substr($0, RSTART + 5, RLENGTH - 6)
	match($0, /in: \[[^]]*\]/); ins = substr($0, RSTART + 5, RLENGTH - 6)
	pre = substr($0, 1, RSTART - 1); post = substr($0, RSTART + RLENGTH)
	k = split(ins, opd, /, /)
	if (k >= 2) {
		s = opd[1]
		for (i = 2; i < k; i++)
			s = s ", " opd[i]
		mutant(op, "operand dropped", pre "in: [" s "]" post)
	}
	mutant(op, "operand added", pre "in: [" ins ", " opd[1] "]" post)
	for (a = 1; a <= na; a++)
		if (match($0, " " attr[a] ": [^,}]+")) {
			v = substr($0, RSTART + length(attr[a]) + 3, RLENGTH - length(attr[a]) - 3)
			nv = v == "true" ? "false" : v == -1 ? 2 : v == 0 ? 1 : v * 2
			mutant(op, attr[a], substr($0, 1, RSTART - 1) " " attr[a] ": " nv substr($0, RSTART + RLENGTH))
		}
}
/^- \{op: [^,]+, a: / {
	match($0, /op: [^,]+,/); op = substr($0, RSTART + 4, RLENGTH - 5)
	for (a = 1; a <= ng; a++)
		if (match($0, " " gf[a] ": [^,}]+")) {
			v = substr($0, RSTART + length(gf[a]) + 3, RLENGTH - length(gf[a]) - 3)
			nv = gf[a] == "format" ? (v == "fp8" ? "fp16" : "fp8") : v * 2
			mutant(op, "gemm " gf[a], substr($0, 1, RSTART - 1) " " gf[a] ": " nv substr($0, RSTART + RLENGTH))
		}
	if (match($0, / grid: \[[0-9]+, [0-9]+, [0-9]+\]/)) {
		split(substr($0, RSTART + 8, RLENGTH - 9), g, /, /)
		ng2 = g[1] != g[3] ? g[3] ", " g[2] ", " g[1] : g[2] ", " g[1] ", " g[3]
		if (ng2 != g[1] ", " g[2] ", " g[3])
			mutant(op, "gemm grid", substr($0, 1, RSTART - 1) " grid: [" ng2 "]" substr($0, RSTART + RLENGTH))
	}
	if (match($0, / cast: (early|late),/)) {
		v = substr($0, RSTART + 7, RLENGTH - 8)
		mutant(op, "gemm cast", substr($0, 1, RSTART - 1) " cast: " (v == "early" ? "late" : "early") "," \
		       substr($0, RSTART + RLENGTH))
	}
}
END {
	for (i = 1; want && i <= NR; i++)
		print line[i]
}
