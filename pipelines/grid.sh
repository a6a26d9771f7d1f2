# grid N: prints "COLS ROWS", the heatmap grid of N tiles that make report
# and make report-compare draw: as many columns as the divisor of N
# nearest sqrt(1.5 N) (46 x 32 for 1,472), else ceil(sqrt(1.5 N)) with a
# short last row. Sourced by pipelines/report.sh and pipelines/compare.sh.
grid() {
	awk -v n="$1" 'BEGIN {
		t = sqrt(1.5 * n); best = 0
		for (d = 1; d <= n; d++)
			if (n % d == 0 && d >= 0.75 * t && d <= 1.34 * t && (best == 0 || (d - t) ^ 2 < (best - t) ^ 2))
				best = d
		if (best == 0) best = int(t) + (int(t) < t)
		print best, int((n + best - 1) / best) }'
}
