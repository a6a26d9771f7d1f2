/* amp-sweep: a sweep spec -> a directory of jobs (jobs.txt, a Makefile, a
 * Slurm array script); one job run; the finished jobs merged into one
 * ranked table (formats/sweep.md, docs/sweeps.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "study/sweep.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-sweep jobs -o DIR SPEC\n"
	"       amp-sweep run JOBDIR...\n"
	"       amp-sweep merge [--rank FIGURE] [--json] [-o FILE] DIR\n"
	"       amp-sweep plot FIGURE --by AXIS [-o FILE] DIR\n"
	"Turn one compile into a study (formats/sweep.md, docs/sweeps.md).\n"
	"\n"
	"jobs: read the sweep spec SPEC (amp-sweep: 1), whose axes - models, batch,\n"
	"tokens, layers, machines, pins, plan_flags, group_flags, limits - multiply to the\n"
	"candidates, and write DIR: the derived model files (models/), the machine\n"
	"files (machines/), one job directory per candidate (jobs/NNNNNN/job.yaml),\n"
	"index.tsv (each job's axis values), jobs.txt (one command per job, for GNU\n"
	"parallel), a Makefile (make -C DIR -j2; make -C DIR merge writes\n"
	"DIR/merge.tsv) and slurm.sbatch (a job array); these call this amp-sweep\n"
	"by its absolute path. The same spec and the same amp-sweep write the same\n"
	"bytes; a DIR holding another sweep is refused.\n"
	"\n"
	"run: run each job (amp-plan | amp-compose | amp-expand | amp-exchange |\n"
	"amp-group, then amp-emit and amp-capture, the tools beside amp-sweep) and\n"
	"write its capture.json, emit.txt and, last and atomically, result.json.\n"
	"A job whose result.json exists is skipped; an interrupted one is redone.\n"
	"On a terminal, each job's end says how many jobs of its sweep are done\n"
	"(amp-sweep: 4 of 6 jobs done: DIR/jobs/000004);\n"
	"nothing is printed when standard error is not a terminal.\n"
	"\n"
	"merge: one table of DIR's jobs, ranked by FIGURE, fewest first (a figure of\n"
	"the capture's summary; default total_cycles), jobs whose pipeline refused\n"
	"them next, then the jobs without a result, listed as missing. TSV, or one\n"
	"JSON document with --json.\n"
	"\n"
	"plot: a PNG of the summary FIGURE of DIR's finished jobs against the axis\n"
	"AXIS (batch, tokens, layers, ... as index.tsv names them), one line per\n"
	"combination of the other axes' values, drawn by gnuplot (Debian package\n"
	"gnuplot-nox; $GNUPLOT names another). The same results give the same bytes.\n";

static const char epilogue[] =
	"Exit status: 0 success (run: every job recorded or already done; merge:\n"
	"also with jobs missing, which it counts on standard error), 1 bad input or\n"
	"a job that could not run or a write error, 2 usage error.\n";

static const Opt opts[] = {
	{ 'o', 'o', "output", OPT_ARG, "DIR|FILE", "file",
	  "jobs: the directory to write (required);\n"
	  "merge: the table's file, plot: the PNG (default:\n"
	  "standard output, not a terminal), atomically" },
	{ 'R', 0, "rank", OPT_ARG, "FIGURE", NULL,
	  "merge: the summary figure to rank by" },
	{ 'B', 0, "by", OPT_ARG, "AXIS", NULL,
	  "plot: the axis along x (required)" },
	{ 'J', 0, "json", OPT_NOARG, NULL, NULL,
	  "merge: write JSON instead of TSV" },
	{ 0 },
};

static const OptTool tool = { "amp-sweep", usage, opts, epilogue };

/* This binary's absolute path, which jobs.txt, the Makefile and
 * slurm.sbatch call (no amp-sweep on PATH needed); "amp-sweep" when the
 * system does not say. */
static const char *self_path(void)
{
	const char *exe = tool_exe();
	return exe ? exe : "amp-sweep";
}

/* The directory of this binary, where its sibling amp-* tools are; NULL
 * when they are not there (then PATH finds them). */
static const char *bin_dir(void)
{
	static char *dir;       /* (kept for the run) */
	free(dir);
	dir = tool_exe_dir();
	char *probe = dir ? xasprintf("%s/amp-plan", dir) : NULL;
	int ok = probe && access(probe, X_OK) == 0;
	free(probe);
	return ok ? dir : NULL;
}

int main(int argc, char **argv)
{
	const char *out = NULL, *rank = NULL, *by = NULL, *cmd;
	int json = 0, c;
	Err e;

	OptParse op;
	const char *arg;
	opt_init(&op, &tool, argc, argv);
	while ((c = opt_next(&op, &arg)) != -1) {
		switch (c) {
		case 'o': out = arg; break;
		case 'R': rank = arg; break;
		case 'J': json = 1; break;
		case 'B': by = arg; break;
		}
	}
	if (op.optind == argc)
		usage_error("a command: jobs, run, merge or plot");
	cmd = argv[op.optind++];
	int nargs = argc - op.optind;
	if (strcmp(cmd, "merge") && (rank || json))
		usage_error("--rank and --json are options of merge");
	if (strcmp(cmd, "plot") && by)
		usage_error("--by is an option of plot");

	if (!strcmp(cmd, "jobs")) {
		Sweep s;
		if (nargs != 1)
			usage_error("jobs reads one sweep spec; found %d", nargs);
		if (!out)
			usage_error("jobs needs -o DIR, the directory to write");
		char *dir = xstrdup(out);
		for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
			dir[n - 1] = 0;
		if (!sweep_safe_path(dir))
			usage_error("-o '%s': a job directory's path is letters, digits and . _ + - / only, "
				    "not starting with '-' (it goes into shell commands and make targets)", out);
		if (sweep_load(&s, argv[op.optind], &e) || sweep_write(&s, dir, self_path(), &e))
			fail(&e);
		fprintf(stderr, "amp-sweep: %lld jobs in %s/jobs.txt\n", (long long)s.njobs, dir);
		free(dir);
		sweep_free(&s);
		return EXIT_OK;
	}
	if (!strcmp(cmd, "run")) {
		if (out)
			usage_error("run writes into each job's directory; it takes no -o");
		if (!nargs)
			usage_error("run needs a job directory (DIR/jobs/NNNNNN)");
		const char *bin = bin_dir();
		int tty = isatty(STDERR_FILENO);
		for (int i = op.optind; i < argc; i++) {
			int skipped;
			if (sweep_run(argv[i], bin, &skipped, &e)) {
				fprintf(stderr, "amp-sweep: %s: %s\n", argv[i], e.msg);
				return EXIT_BAD;
			}
			if (tty) {      /* progress, on a terminal only */
				int done, total;
				sweep_progress(argv[i], &done, &total);
				fprintf(stderr, "amp-sweep: %d of %d jobs done: %s%s\n", done, total, argv[i],
					skipped ? " (already)" : "");
			}
		}
		return EXIT_OK;
	}
	if (!strcmp(cmd, "merge")) {
		SweepMerge m;
		if (nargs != 1)
			usage_error("merge reads one job directory; found %d", nargs);
		Output *o = output_open(out, 0, &e);
		if (!o)
			fail(&e);
		if (sweep_merge(argv[op.optind], rank ? rank : "total_cycles", json, o, &m, &e)) {
			output_abort(o);
			fail(&e);
		}
		if (output_commit(o, &e))
			fail(&e);
		if (m.missing) {
			fprintf(stderr, "amp-sweep: %d of %d jobs missing (no result yet):", m.missing, m.jobs);
			for (int i = 0; i < m.nmissing_ids; i++)
				fprintf(stderr, " %s", m.missing_ids[i]);
			fprintf(stderr, "%s\n", m.missing > m.nmissing_ids ? " ..." : "");
		}
		sweep_merge_free(&m);
		return EXIT_OK;
	}
	if (!strcmp(cmd, "plot")) {
		if (nargs != 2)
			usage_error("plot takes a figure and a job directory: plot FIGURE --by AXIS DIR");
		if (!by)
			usage_error("plot needs --by AXIS, the axis along x");
		if (!out && isatty(STDOUT_FILENO))
			usage_error("plot writes a PNG: give -o FILE or redirect standard output");
		const char *gp = getenv("GNUPLOT");
		int left;
		Output *o = output_open(out, 0, &e);
		if (!o)
			fail(&e);
		if (sweep_plot(argv[op.optind + 1], argv[op.optind], by, gp && *gp ? gp : "gnuplot", o, &left, &e)) {
			output_abort(o);
			fail(&e);
		}
		if (output_commit(o, &e))
			fail(&e);
		if (left)
			fprintf(stderr, "amp-sweep: %d jobs left out of the plot (failed, or no result yet)\n", left);
		return EXIT_OK;
	}
	usage_error("unknown command '%s' (jobs, run, merge or plot)", cmd);
}
