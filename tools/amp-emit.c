/* amp-emit: grouped stage -> program (encoded exchange tables). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/group.h"
#include "base/num.h"
#include "stage/plan.h"
#include "stage/stage_io.h"
#include "lower/program.h"
#include "run/run.h"
#include "stage/limits.h"
#include "stage/table.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-emit [OPTION]... [GROUPED]\n"
	"       amp-emit --list [PROGRAM|GROUPED]\n"
	"Encode every tile's exchange instructions, per phase, into a program\n"
	"(formats/program.md): rows identical once addresses are masked are stored\n"
	"once and patched; each row costs exactly the footprint of\n"
	"docs/machine.md §2. Check the table budget, the fragment limit and SRAM\n"
	"per tile first, and that every placement lies within the SRAM planned\n"
	"data may use (and the machine within 32-bit addresses); over a limit,\n"
	"name the worst tile, its phase, the figure and the limit (or the\n"
	"placement), and write no program. --list prints a program, or\n"
	"the rows a grouped stage implies, as deterministic text (the two agree).\n";

static const char epilogue[] =
	"Exit status: 0 success, 1 bad input, a limit exceeded or a write error,\n"
	"2 usage error.\n";

static const Opt opts[] = {
	{ 'm', 'm', "machine", OPT_ARG, "FILE", "machine",
	  "the machine file the stage was planned for (or\n"
	  "NAME: the shared machines/NAME.yaml); its\n"
	  "limits and rates are the ones checked (default:\n"
	  "the file the stage's provenance names, from the\n"
	  "shared machines directory). The stage's machine\n"
	  "header must equal it and the provenance's hash\n"
	  "match it" },
	{ 'B', 0, "table-budget", OPT_ARG, "BYTES", NULL,
	  "exchange tables per tile, all phases, after\n"
	  "row sharing (default: the machine's policy)" },
	{ 'F', 0, "fragment-limit", OPT_ARG, "N", NULL,
	  "send + receive fragments per tile (default: the\n"
	  "machine's policy)" },
	{ 'S', 0, "sram-limit", OPT_ARG, "BYTES", NULL,
	  "tensors + tables per tile (default: sram_bytes -\n"
	  "reserved_bytes); a study override: a program\n"
	  "over the machine's bytes cannot run on it" },
	{ 'R', 0, "report", OPT_NOARG, NULL, NULL,
	  "print every tile's SRAM use on stderr, a line per\n"
	  "tile that holds anything (tensors at their peak\n"
	  "and its step, tables); the tables of the tile\n"
	  "with the most, phase by phase; then the largest" },
	{ 'M', 0, "model", OPT_ARG, "FILE", "file",
	  "the model the stage lowers: the stage must agree\n"
	  "with it (every tensor's shape, dtype and fp8\n"
	  "scale; every compute step derived again from its\n"
	  "op and the plan's choices, field by field: its\n"
	  "operands, result and attributes, a matmul's GEMM\n"
	  "record's m, k, n and format; no step for anything\n"
	  "else; the file must be the one amp-plan planned\n"
	  "from), and the program embeds it, so amp-run\n"
	  "checks it and its reference against it" },
	{ 'C', 0, "scales", OPT_ARG, "FILE", "file",
	  "with --model: the fp8 scales amp-plan planned\n"
	  "with, checked and embedded the same way" },
	{ 'N', 0, "no-model", OPT_NOARG, NULL, NULL,
	  "write the program without its model: amp-run\n"
	  "then checks movement and arithmetic only, and\n"
	  "says so on every run. A program is written only\n"
	  "with --model or --no-model" },
	{ 'L', 0, "list", OPT_NOARG, NULL, NULL,
	  "print the listing to stdout instead" },
	{ 'o', 'o', "output", OPT_ARG, "FILE", "file",
	  "write to FILE, atomically (default: stdout)" },
	{ 'z', 'z', "compress", OPT_NOARG, NULL, NULL,
	  "compress the output with zstd" },
	{ 0 },
};

static const OptTool tool = { "amp-emit", usage, opts, epilogue };

/* Every send fragment within max_transfer_bytes, and the grouped stage's
 * order (no tile reads bytes of a step before the transfer of that step
 * that writes them): what amp-group checks, checked again before encoding. */
static int check_stage(const Plan *pl, Err *e)
{
	for (int i = 0, p = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind != X_SEND || x->len <= pl->machine.max_transfer_bytes)
			continue;
		while (p + 1 < pl->nph && pl->ph[p].last < x->step)
			p++;
		return errf(e, "tile %lld, phase %d (step %d, op %s): a send of %lld bytes, over "
			    "max_transfer_bytes (%lld)", (long long)tile_mod(x->src_tile, pl->machine.tiles), p,
			    x->step, pl->s[x->step].op, (long long)x->len,
			    (long long)pl->machine.max_transfer_bytes);
	}
	return group_check_order(pl, e);
}

/* --report: the tile with the most table bytes, its rows' bytes phase by
 * phase (before sharing: a row identical to one the tile already holds
 * costs nothing in its total), the largest 8 first and the rest summed,
 * and where to act: the ops of its largest phase. */
static void table_breakdown(const Plan *pl, int64_t w, int64_t total)
{
	int64_t T = pl->machine.tiles, *t = xmalloc((size_t)T * sizeof *t), *by = xcalloc((size_t)pl->nph + 1, sizeof *by);
	int *order = xmalloc((size_t)(pl->nph + 1) * sizeof *order), n = 0;
	for (int p = 0; p < pl->nph; p++) {
		memset(t, 0, (size_t)T * sizeof *t);
		phase_row_sums(pl, p, t, NULL);
		if ((by[p] = t[w]) > 0)
			order[n++] = p;
	}
	for (int i = 1; i < n; i++)             /* largest first, then phase order */
		for (int j = i; j > 0 && by[order[j]] > by[order[j - 1]]; j--) {
			int x = order[j];
			order[j] = order[j - 1], order[j - 1] = x;
		}
	fprintf(stderr, "amp-emit: tile %lld's tables, %lld bytes, by phase (rows before sharing):\n", (long long)w,
		(long long)total);
	int64_t rest = 0;
	for (int i = 0; i < n; i++)             /* the largest 8, then the rest in one line */
		if (i < 8)
			fprintf(stderr, "amp-emit:   phase %d (%s): %lld bytes\n", order[i], pl->ph[order[i]].label,
				(long long)by[order[i]]);
		else
			rest += by[order[i]];
	if (n > 8)
		fprintf(stderr, "amp-emit:   %d more phases: %lld bytes\n", n - 8, (long long)rest);
	if (n)
		fprintf(stderr, "amp-emit: to reduce them, start with phase %d (%s): pin another grid, staging, "
			"out_staging or reduce for its ops in the model (formats/model.md), or compare amp-group "
			"--weights direct and forward\n", order[0], pl->ph[order[0]].label);
	free(t);
	free(by);
	free(order);
}

/* Every placement inside the SRAM planned data may use, and every
 * address within the program format's 32 bits. */
static int check_addresses(const Plan *pl, int64_t avail, int64_t sram_limit, Err *e)
{
	const Machine *mc = &pl->machine;
	if (mc->sram_bytes > ((int64_t)1 << 32))
		return errf(e, "machine '%s': sram_bytes %lld is over 4294967296: a program's addresses are 32 "
			    "bits (formats/program.md)", mc->name, (long long)mc->sram_bytes);
	for (int i = 0; i < pl->np; i++) {
		const Placement *p = &pl->p[i];
		int64_t hi = p->addr + (plan_stacked(pl, i) ? place_instance(p) * pl->t[p->tensor].count
							    : place_max_bytes(p));
		if (hi > avail)
			return errf(e, "placement '%s' occupies bytes %lld..%lld of its tiles, beyond the %lld "
				    "available for planned data (%s)", p->name, (long long)p->addr, (long long)hi,
				    (long long)avail, sram_limit >= 0 ? "--sram-limit" : "sram_bytes - reserved_bytes");
	}
	return 0;
}

/* The limits (lib/stage/limits.h), each naming the worst tile and its
 * phase; with report, every tile's figures first. */
static int check_limits(const Plan *pl, int report, int64_t sram_limit, Err *e)
{
	int64_t T = pl->machine.tiles, avail = sram_limit >= 0 ? sram_limit : machine_avail(&pl->machine);
	if (check_addresses(pl, avail, sram_limit, e))
		return -1;
	int64_t *table = xcalloc((size_t)T, 8), *peak = xcalloc((size_t)T, 8);
	int *peak_step = xcalloc((size_t)T, sizeof *peak_step);
	Limits l;

	limits_measure(pl, avail, &l, table, NULL, peak, peak_step);
	for (int64_t t = 0; report && t < T; t++)     /* every tile that holds anything */
		if (peak[t] + table[t] > 0)
			fprintf(stderr, "amp-emit: tile %lld: %lld bytes (tensors %lld at step %d + tables %lld) of %lld\n",
				(long long)t, (long long)(peak[t] + table[t]), (long long)peak[t], peak_step[t],
				(long long)table[t], (long long)avail);
	if (report) {
		table_breakdown(pl, l.table_tile, l.table);
		fprintf(stderr, "amp-emit: largest SRAM use: tile %lld, %lld bytes (tensors %lld + tables %lld) "
			"of %lld available; largest tables %lld bytes (tile %lld); most fragments %lld (tile %lld)\n",
			(long long)l.sram_tile, (long long)l.sram, (long long)l.peak, (long long)l.peak_tables,
			(long long)avail, (long long)l.table, (long long)l.table_tile, (long long)l.frags,
			(long long)l.frag_tile);
	}
	int rc = limits_error(pl, &l, sram_limit >= 0 ? "--sram-limit" : NULL, 1, e);
	free(table);
	free(peak);
	free(peak_step);
	return rc;
}

typedef struct {
	const Plan *pl;
	int report;
	int64_t sram;
	int rc;
	Err e;
} LimitsJob;

static void *limits_run(void *arg)
{
	LimitsJob *l = arg;
	l->rc = check_limits(l->pl, l->report, l->sram, &l->e);
	table_release();                /* this thread's rows */
	return NULL;
}

int main(int argc, char **argv)
{
	const char *out_path = NULL, *in_path, *model_path = NULL, *scales_path = NULL, *machine_path = NULL;
	int compress = 0, list = 0, report = 0, no_model = 0, c;
	int64_t budget = -1, limit = -1, sram = -1;
	Plan pl;
	Program prog;
	Err e;

	OptParse op;
	const char *arg;
	opt_init(&op, &tool, argc, argv);
	while ((c = opt_next(&op, &arg)) != -1) {
		switch (c) {
		case 'B': budget = count_arg("--table-budget", arg); break;
		case 'F': limit = count_arg("--fragment-limit", arg); break;
		case 'R': report = 1; break;
		case 'S': sram = count_arg("--sram-limit", arg); break;
		case 'L': list = 1; break;
		case 'M': model_path = arg; break;
		case 'C': scales_path = arg; break;
		case 'N': no_model = 1; break;
		case 'm': machine_path = machine_arg(arg); break;
		case 'o': out_path = arg; break;
		case 'z': compress = 1; break;
		}
	}
	in_path = one_input(argc, argv, op.optind, list ? "program or grouped stage" : "grouped stage");
	if (scales_path && !model_path)
		usage_error("--scales needs --model");
	distinct_outputs((ToolFile[]){ { "-o", out_path }, { "the input", in_path }, { "--model", model_path },
				       { "--scales", scales_path }, { "--machine", machine_path } }, 1, 5);
	if (no_model && model_path)
		usage_error("--no-model and --model name opposite things; give one");
	if (!list && !model_path && !no_model)
		usage_error("name the model the stage lowers (--model FILE, with --scales FILE when "
			    "amp-plan had them), so that amp-run checks the program against it; "
			    "--no-model writes one that amp-run checks for movement and arithmetic only");

	if (list) {
		int is_prog;
		if (program_or_stage(&pl, &prog, &is_prog, in_path, &e))
			fail(&e);
		if (is_prog ? program_list(&prog, &pl, stdout, &e) : stage_list(&pl, stdout, &e))
			fail(&e);
		if (is_prog)
			program_free(&prog);
		plan_free(&pl);
		return fflush(stdout) ? EXIT_BAD : EXIT_OK;
	}

	if (stage_read(&pl, in_path, STAGE_GROUP, &e))
		fail(&e);
	check_machine(&pl, machine_path, in_path);
	if (budget >= 0)
		pl.machine.table_budget_bytes = budget;
	if (limit >= 0)
		pl.machine.fragment_limit = limit;
	if (check_stage(&pl, &e))
		fail(&e);
	char *mtext = NULL, *stext = NULL;
	size_t mlen = 0, slen = 0;
	if (model_path && (input_slurp(model_path, &mtext, &mlen, &e) ||
			   (scales_path && input_slurp(scales_path, &stext, &slen, &e))))
		fail(&e);
	if (model_path)
		check_planned_file(&pl, "model", mtext, mlen, model_path, in_path);
	if (scales_path)
		check_planned_file(&pl, "scales", stext, slen, scales_path, in_path);
	if (model_path && run_check_texts(&pl, mtext, mlen, model_path, stext, slen, scales_path, &e))
		fail(&e);
	Prov pr;                /* the program's STAGE text records this run too */
	tool_prov(&pr);
	if (model_path)
		prov_file(&pr, "model", model_path, mtext, mlen);
	if (scales_path)
		prov_file(&pr, "scales", scales_path, stext, slen);
	plan_add_prov(&pl, &pr);
	prov_free(&pr);
	/* The limits (every tile's tables and memory) on a second thread while the
	 * program is built: both only read the plan, and nothing is written
	 * before both are done; a limit passed is the error. */
	LimitsJob lim = { &pl, report, sram, 0, { { 0 } } };
	pthread_t th;
	int threaded = pthread_create(&th, NULL, limits_run, &lim) == 0;
	if (!threaded)
		limits_run(&lim);
	int brc = program_build(&pl, &prog, &e);
	if (threaded)
		pthread_join(th, NULL);
	if (lim.rc) {
		if (!brc)
			program_free(&prog);
		fail(&lim.e);
	}
	if (brc)
		fail(&e);
	prog.model = mtext, prog.model_len = mlen;      /* freed with the program */
	prog.scales = stext, prog.scales_len = slen;
	Output *o = output_open(out_path, compress, &e);
	if (!o)
		fail(&e);
	if (program_write(&prog, o, &e)) {
		output_abort(o);
		fail(&e);
	}
	if (output_commit(o, &e))
		fail(&e);
	program_free(&prog);
	plan_free(&pl);
	return EXIT_OK;
}
