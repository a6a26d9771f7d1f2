/* amp-plan: model + machine -> plan stage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "base/num.h"
#include "planner/planner.h"
#include "stage/plan_memory.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-plan [OPTION]... [MODEL]\n"
	"Plan MODEL (a model file, formats/model.md; standard input when absent\n"
	"or '-') for a machine and write the plan stage (formats/plan.md).\n";

static const char epilogue[] =
	"Input compressed with zstd is recognised by its magic number.\n"
	"Exit status: 0 success, 1 bad input, a limit exceeded or a write error,\n"
	"2 usage error.\n";

static const Opt opts[] = {
	{ 'm', 'm', "machine", OPT_ARG, "FILE", "machine",
	  "machine file, or NAME for machines/NAME.yaml in the\n"
	  "shared data (amp736, amp1472, amp5888; default\n"
	  "amp1472): $AMP_SHARE, else share/amp or share\n"
	  "beside the binary's directory" },
	{ 'O', 0, "objective", OPT_ARG, "NAME", "words:cycles memory capacity capacity+tables",
	  "how GEMM plans (and attention's key and value\n"
	  "staging) are chosen: 'cycles' (default: the\n"
	  "candidates ordered by the formula's cycle estimate,\n"
	  "the fastest of each staging lowered exactly, as\n"
	  "amp-expand, amp-exchange and amp-group would,\n"
	  "against what earlier ops put on every tile; the\n"
	  "fitting one with the fewest modelled cycles wins;\n"
	  "when the whole plan does not fit, planned again\n"
	  "with table bytes priced, then also with the\n"
	  "trials kept 3-10% inside the limits, and when none\n"
	  "fits, the memory objective's plan),\n"
	  "'memory' (every candidate ranked by the formula,\n"
	  "the best per staging lowered exactly; a fitting one\n"
	  "leaving the most headroom on the worst tile, then\n"
	  "with the least tensor + table bytes, wins),\n"
	  "'capacity' (the baseline: total live tensor memory,\n"
	  "then largest allocation, then estimated rows and\n"
	  "cycles, by formula alone) or 'capacity+tables'\n"
	  "(estimated table bytes beside tensor memory, by\n"
	  "formula)" },
	{ 'W', 0, "ownership", OPT_ARG, "MODE", "words:auto tokens batch",
	  "canonical owners of activations: 'tokens' (token\n"
	  "rows, the batch kept together), 'batch' (token rows,\n"
	  "and the batch split across the tiles left over) or\n"
	  "'auto' (default: with memory or cycles, when the\n"
	  "batch can split, both planned and lowered whole\n"
	  "and the better kept, fitting first, then by the\n"
	  "objective, ties to batch; capacity: tokens)" },
	{ 'F', 0, "no-fit-check", OPT_NOARG, NULL, NULL,
	  "with memory or cycles, write the plan even when the\n"
	  "machine cannot hold it (a study override; by default\n"
	  "the plan is lowered and checked as amp-emit would, and\n"
	  "amp-plan exits 1 naming the tile, the figure and what\n"
	  "no plan can avoid)" },
	{ 'N', 0, "no-fold", OPT_NOARG, NULL, NULL,
	  "keep every rmsnorm whole (a study override; by\n"
	  "default a wide rmsnorm that only matmuls read folds\n"
	  "into their reductions, which scale its rows, when\n"
	  "that plan is the faster: formats/plan.md, \"Folded\n"
	  "rmsnorm\")" },
	{ 'G', 0, "no-segments", OPT_NOARG, NULL, NULL,
	  "run every causal attention as one grid of query and\n"
	  "key blocks (a study override; by default a prefill's\n"
	  "causal attention may run in segments of query rows,\n"
	  "each over the keys it sees, when that is faster:\n"
	  "formats/plan.md, \"Causal segments\")" },
	{ 'K', 0, "state-blocks", OPT_ARG, "N", NULL,
	  "cut each state's home (a KV cache) into at most N\n"
	  "blocks of positions per sequence and kv head (a study\n"
	  "override; by default as many as the tiles allow, or\n"
	  "fewer when that plan is the faster: formats/plan.md,\n"
	  "\"State homes\")" },
	{ 'S', 0, "scales", OPT_ARG, "FILE", "file",
	  "fp8 scale exponents by tensor name (formats/scales.md;\n"
	  "amp-run --calibrate writes one)" },
	{ 'E', 0, "explain", OPT_OPTARG, "N", NULL,
	  "print each GEMM's N best candidates (default 5) and\n"
	  "the chosen plans to standard output; the plan is\n"
	  "then written only with -o" },
	{ 'o', 'o', "output", OPT_ARG, "FILE", "file",
	  "write the plan to FILE, atomically (default: stdout)" },
	{ 'z', 'z', "compress", OPT_NOARG, NULL, NULL,
	  "compress the output with zstd" },
	{ 0 },
};

static const OptTool tool = { "amp-plan", usage, opts, epilogue };

static void print_candidate(int rank, const Candidate *c, int chosen)
{
	char grid[64];
	snprintf(grid, sizeof grid, "[%lld, %lld, %lld]", (long long)c->grid[0],
		 (long long)c->grid[1], (long long)c->grid[2]);
	printf("  %3d%c  %-15s %-5s  %-9s  %-6s  %-7s  %5lld  %10lld  %12lld  %9lld  %6lld  %9lld  %9lld",
	       rank, chosen ? '*' : ' ', grid, cast_name(c->cast), staging_name(c->staging),
	       c->unpack ? "unpack" : "direct", c->grid[1] == 1 ? "-" : c->scatter ? "scatter" : "gather",
	       (long long)c->tiles, (long long)c->tile_bytes, (long long)c->total,
	       (long long)c->largest, (long long)c->rows, (long long)c->cycles, (long long)c->tables);
	if (c->exact)
		printf("  %9lld  %6lld  %9lld  %4s", (long long)c->x_table, (long long)c->x_frags,
		       (long long)c->x_peak, c->fits ? "yes" : "no");
	if (c->exact && c->x_cycles)
		printf("  %9lld", (long long)c->x_cycles);
	printf("\n");
}

static void explain_descent(const Descent *d)
{
	printf("\ndescent: the greedy plan %lld cycles, kept %lld (whole plans lowered without amp-group's "
	       "schedule; each change built with the other GEMMs held)\n", (long long)d->before, (long long)d->after);
	if (!d->n) {
		printf("  (no change: no GEMM kept a fitting trial with a lower estimate than its choice)\n");
		return;
	}
	printf("  gemm             grid             cast   staging    out     reduce      saving   whole cycles  fits  kept\n");
	for (int i = 0; i < d->n; i++) {
		const DescentTry *t = &d->t[i];
		const Candidate *c = &t->c;
		char grid[64], saving[32], cyc[32];
		snprintf(grid, sizeof grid, "[%lld, %lld, %lld]", (long long)c->grid[0], (long long)c->grid[1],
			 (long long)c->grid[2]);
		snprintf(saving, sizeof saving, t->together ? "together" : "%lld", (long long)t->gain);
		snprintf(cyc, sizeof cyc, t->cycles < 0 ? "-" : "%lld", (long long)t->cycles);
		printf("  %-16s %-16s %-6s %-10s %-7s %-8s %10s %14s  %4s  %4s", t->op, grid, cast_name(c->cast),
		       staging_name(c->staging), c->unpack ? "unpack" : "direct",
		       c->grid[1] == 1 ? "-" : c->scatter ? "scatter" : "gather", saving, cyc,
		       t->cycles < 0 ? "-" : t->fits ? "yes" : "no", t->taken ? "yes" : "no");
		if (t->cycles < 0 || !t->fits)
			printf("  (%s)", t->why);
		printf("\n");
	}
}

static void explain(const Plan *pl, const Model *m, const Explain *ex, Objective obj, int fell_back,
		    const Descent *d)
{
	printf("objective: %s\n", objective_name(obj));
	if (fell_back) {
		printf("(no plan the cycles search built fits the machine's limits: this is the memory\n"
		       " objective's plan, which does; its candidates follow)\n");
		obj = OBJ_MEMORY;
	}
	printf("ownership: %s\n", plan_batch_split(pl) ? "batch (token rows, the batch split across the tiles left over)"
						       : "tokens (token rows, the batch kept together)");
	if (obj >= OBJ_MEMORY)
		printf("(estimates by formula; 'x tables', 'x frags' and 'x peak' are the exact figures of\n"
		       " a trial lowering, on the worst tile, earlier ops included: table bytes,\n"
		       " fragments, and tensors + tables; 'fits' checks them against the table budget,\n"
		       " the fragment limit and the SRAM available%s)\n",
		       obj == OBJ_CYCLES ? "; 'x cycles' the trial's modelled cycles, by which\n"
		       " fitting candidates rank, beside the formula's estimate in 'cycles'" : "");
	for (int i = 0; i < m->nops; i++) {
		const Explain *x = &ex[i];
		if (!x->op)
			continue;
		const Gemm *g = NULL;
		for (int k = 0; k < pl->ng; k++)
			if (strcmp(pl->g[k].op, x->op) == 0)
				g = &pl->g[k];
		if (x->exact)
			printf("\ngemm %s: m %lld, k %lld, n %lld, %s%s; %lld candidates, %d lowered exactly, "
			       "%lld fit (%lld bytes per tile available, %lld in use before it)\n",
			       x->op, (long long)g->m, (long long)g->k, (long long)g->n, fmt_name(g->fmt),
			       g->pinned ? ", pinned" : "", (long long)x->considered, x->exact,
			       (long long)x->fitting, (long long)x->avail, (long long)x->base);
		else
			printf("\ngemm %s: m %lld, k %lld, n %lld, %s%s; %lld candidates, %lld fit "
			       "(%lld bytes per tile available, %lld in use before it)\n",
			       x->op, (long long)g->m, (long long)g->k, (long long)g->n, fmt_name(g->fmt),
			       g->pinned ? ", pinned" : "", (long long)x->considered, (long long)x->fitting,
			       (long long)x->avail, (long long)x->base);
		if (x->exact && obj == OBJ_CYCLES && (x->price > 0 || x->margin > 0)) {
			/* an attempt after the first (lib/planner/planner.c): say how it ranks */
			printf("  (planned again, as the whole plan did not fit: fitting trials rank by x cycles\n"
			       "   times the op's runs + %.2f cycles per byte of x tables", x->price);
			if (x->margin > 0)
				printf(", and fit %g%% inside every limit", x->margin * 100);
			printf(")\n");
		}
		printf("  rank  grid            cast   staging    out     reduce   tiles  tile bytes   total bytes"
		       "    largest    rows     cycles     tables%s\n",
		       x->exact ? obj == OBJ_CYCLES ? "   x tables  x frags    x peak  fits   x cycles" :
			   "   x tables  x frags    x peak  fits" : "");
		for (int k = 0; k < x->nbest; k++) {
			const Candidate *c = &x->best[k];
			int chosen = !memcmp(c->grid, g->grid, sizeof c->grid) && c->cast == g->cast &&
				     c->staging == g->staging && c->unpack == g->unpack &&
				     c->scatter == g->scatter;
			print_candidate(k + 1, c, chosen);
		}
	}
	if (obj == OBJ_CYCLES && !fell_back && d->before)
		explain_descent(d);
	printf("\n%-16s %-16s %-6s %-10s %-7s %-8s %6s %12s\n", "gemm", "grid", "cast", "staging", "out",
	       "reduce", "tiles", "peak bytes");
	for (int k = 0; k < pl->ng; k++) {
		const Gemm *g = &pl->g[k];
		char grid[64];
		snprintf(grid, sizeof grid, "[%lld, %lld, %lld]", (long long)g->grid[0],
			 (long long)g->grid[1], (long long)g->grid[2]);
		printf("%-16s %-16s %-6s %-10s %-7s %-8s %6lld %12lld\n", g->op, grid, cast_name(g->cast),
		       staging_name(g->staging), g->unpack ? "unpack" : "direct",
		       g->grid[1] == 1 ? "-" : g->scatter ? "scatter" : "gather", (long long)g->tiles,
		       (long long)g->peak_bytes);
	}
	int64_t worst;
	int at;
	int64_t peak = plan_memory(pl, NULL, NULL, NULL, &worst, &at);
	printf("\nper-tile memory peak: %lld bytes on tile %lld at step %d (op %s); %lld available\n",
	       (long long)peak, (long long)worst, at, pl->ns ? pl->s[at].op : "-",
	       (long long)machine_avail(&pl->machine));
}

int main(int argc, char **argv)
{
	const char *machine_path = NULL, *out_path = NULL, *in_path = NULL, *scales_path = NULL;
	Scales scales = { NULL, NULL, 0 };
	int fell_back = 0;
	PlanOpts po = { OBJ_CYCLES, 0, NULL, OWN_AUTO, 0, NULL, &fell_back, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 };
	static const char *const ownerships[] = { "auto", "tokens", "batch" };    /* by Ownership */
	int compress = 0, c, k;
	int64_t n;
	Machine mc;
	Model m;
	Plan pl;
	Err e;

	OptParse op;
	const char *arg;
	opt_init(&op, &tool, argc, argv);
	while ((c = opt_next(&op, &arg)) != -1) {
		switch (c) {
		case 'm': machine_path = machine_arg(arg); break;
		case 'o': out_path = arg; break;
		case 'z': compress = 1; break;
		case 'O':
			for (k = OBJ_CAPACITY; k <= OBJ_CYCLES && strcmp(arg, objective_name(k)); k++)
				;
			if (k > OBJ_CYCLES)
				usage_error("unknown objective '%s' (expected memory, cycles, capacity or "
					    "capacity+tables)", arg);
			po.objective = (Objective)k;
			break;
		case 'E':
			po.explain = 5;
			if (arg) {
				if (parse_i64(arg, &n) || n < 1 || n > 1000)
					usage_error("--explain takes a count from 1 to 1000, not '%s'", arg);
				po.explain = (int)n;
			}
			break;
		case 'S': scales_path = arg; break;
		case 'F': po.no_fit_check = 1; break;
		case 'N': po.no_fold = 1; break;
		case 'G': po.no_segments = 1; break;
		case 'K':
			if (parse_i64(arg, &n) || n < 1 || n > INT32_MAX)
				usage_error("--state-blocks takes a count from 1 to %d, not '%s'", INT32_MAX, arg);
			po.state_blocks = n;
			break;
		case 'W':
			for (k = OWN_AUTO; k <= OWN_BATCH && strcmp(arg, ownerships[k]); k++)
				;
			if (k > OWN_BATCH)
				usage_error("unknown ownership '%s' (expected auto, tokens or batch)", arg);
			po.ownership = (Ownership)k;
			break;
		}
	}
	in_path = one_input(argc, argv, op.optind, "model file");
	distinct_outputs((ToolFile[]){ { "-o", out_path }, { "the model", in_path }, { "--machine", machine_path },
				       { "--scales", scales_path } }, 1, 4);

	/* The model is read whole first: provenance records its digest,
	 * whether it came from a file or a pipe. */
	char *mtext;
	size_t mlen;
	Prov pr;
	const char *mpath = machine_path ? machine_path : default_machine();
	if (input_slurp(in_path, &mtext, &mlen, &e) || machine_load(&mc, mpath, &e) ||
	    machine_check_one_chip(&mc, mpath, &e) ||
	    (scales_path && scales_load(&scales, scales_path, &e)) ||
	    model_load_input(&m, input_open_mem(in_path && strcmp(in_path, "-") ? in_path : "<stdin>", mtext, mlen, &e),
			     &e) ||
	    model_check_size(&m, &mc, &e))
		fail(&e);
	tool_prov(&pr);
	prov_file(&pr, "model", in_path, mtext, mlen);
	prov_path(&pr, "machine", mpath);
	if (scales_path)
		prov_path(&pr, "scales", scales_path);
	free(mtext);
	po.scales = &scales;
	Explain *ex = xcalloc((size_t)m.nops + 1, sizeof *ex);
	/* The fit check after --explain's report, so a model that does not fit
	 * still shows its candidates. */
	int check = po.objective >= OBJ_MEMORY && !po.no_fit_check;
	Err fit = { { 0 } };
	po.no_fit_check = 1;
	po.fit = &fit;
	Descent descent = { 0 };
	po.descent = po.explain ? &descent : NULL;
	if (tool_progress_on())
		po.progress = tool_progress;
	int built = plan_build(&pl, &m, &mc, &po, po.explain ? ex : NULL, &e);
	tool_progress_clear();
	if (built)
		fail(&e);
	if (po.explain)
		explain(&pl, &m, ex, po.objective, fell_back, &descent);
	descent_free(&descent);
	if (check && fit.msg[0]) {
		fflush(stdout);
		fail(&fit);
	}
	plan_add_prov(&pl, &pr);
	prov_free(&pr);
	if (!po.explain || out_path)
		write_plan(&pl, out_path, compress);
	explain_free(ex, m.nops);
	free(ex);
	plan_free(&pl);
	model_free(&m);
	scales_free(&scales);
	return EXIT_OK;
}
