/* amp-capture: grouped stage or program -> capture JSON. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "capture/trace.h"
#include "base/num.h"
#include "stage/plan.h"
#include "lower/program.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-capture [OPTION]... [GROUPED|PROGRAM]\n"
	"Read a grouped stage (formats/group.md) or a program written by amp-emit\n"
	"(formats/program.md), recognised by its magic number; standard input when\n"
	"absent or '-'. Write the capture (formats/capture.md): per phase its\n"
	"transfers, bytes, largest row, fragments, modelled cycles and floor\n"
	"(the fewest cycles any order of its transfers allows); per compute\n"
	"step its modelled cycles (the machine's compute cost model); per op\n"
	"and in total compute, exchange, sync and local-copy cycles; beside the\n"
	"total, the model's bound, which no plan of it beats (compute over\n"
	"every tile, a matmul call per chained product, forced syncs, a\n"
	"Loomis-Whitney movement term), and this plan's movement floor (an\n"
	"efficiency figure); and phase_traffic, one record per movement class.\n"
	"Query it with jq (share/jq/). With the machine's clock (machine file\n"
	"version 3), microseconds per run and images/s or tokens/s.\n";

static const char epilogue[] =
	"Exit status: 0 success, 1 bad input or a write error, 2 usage error.\n";

static const Opt opts[] = {
	{ 'm', 'm', "machine", OPT_ARG, "FILE", "machine",
	  "the machine file the stage was planned for, as\n"
	  "amp-emit --machine (default: the file its\n"
	  "provenance names); the stage's machine header\n"
	  "must equal it" },
	{ 'B', 0, "table-budget", OPT_ARG, "BYTES", NULL,
	  "report against this table budget instead of\n"
	  "the machine's (as amp-emit --table-budget)" },
	{ 'F', 0, "fragment-limit", OPT_ARG, "N", NULL,
	  "the same for the fragment limit" },
	{ 'T', 0, "tiles", OPT_ARG, "FILE", "file",
	  "also write the per-tile figures to FILE as TSV: per\n"
	  "tile, bytes sent and received, fragments, table\n"
	  "bytes and SRAM peak; per tile and phase, bytes sent\n"
	  "and received, fragments and row bytes" },
	{ 'R', 0, "trace", OPT_ARG, "FILE", "file",
	  "also write the modelled timeline to FILE as Chrome\n"
	  "trace-event JSON (Perfetto, chrome://tracing): the\n"
	  "critical path, and per sampled tile its compute,\n"
	  "sync and exchange slices and its SRAM in use" },
	{ 'S', 0, "trace-tiles", OPT_ARG, "LIST", NULL,
	  "the tiles the trace shows, such as 0-45,775\n"
	  "(default: tile 0 and each step's and phase's\n"
	  "busiest tile)" },
	{ 'o', 'o', "output", OPT_ARG, "FILE", "file",
	  "write to FILE, atomically (default: stdout)" },
	{ 'z', 'z', "compress", OPT_NOARG, NULL, NULL,
	  "compress the output with zstd" },
	{ 0 },
};

static const OptTool tool = { "amp-capture", usage, opts, epilogue };

int main(int argc, char **argv)
{
	const char *out_path = NULL, *in_path, *tiles_path = NULL, *machine_path = NULL;
	const char *trace_path = NULL, *trace_tiles = NULL;
	char *sel = NULL;
	int compress = 0, c;
	int64_t budget = -1, limit = -1;
	Plan pl;
	Err e;

	OptParse op;
	const char *arg;
	opt_init(&op, &tool, argc, argv);
	while ((c = opt_next(&op, &arg)) != -1) {
		switch (c) {
		case 'B': budget = count_arg("--table-budget", arg); break;
		case 'F': limit = count_arg("--fragment-limit", arg); break;
		case 'T': tiles_path = arg; break;
		case 'R': trace_path = arg; break;
		case 'S': trace_tiles = arg; break;
		case 'm': machine_path = arg; break;
		case 'o': out_path = arg; break;
		case 'z': compress = 1; break;
		}
	}
	in_path = one_input(argc, argv, op.optind, "grouped stage or program");
	if (trace_tiles && !trace_path)
		usage_error("--trace-tiles needs --trace FILE");
	distinct_outputs((ToolFile[]){ { "-o", out_path }, { "--tiles", tiles_path }, { "--trace", trace_path },
				       { "the input", in_path }, { "--machine", machine_path } }, 3, 5);
	if (program_or_stage(&pl, NULL, NULL, in_path, &e))
		fail(&e);
	check_machine(&pl, machine_path, in_path);
	if (budget >= 0)
		pl.machine.table_budget_bytes = budget;
	if (limit >= 0)
		pl.machine.fragment_limit = limit;
	if (trace_tiles) {
		sel = xmalloc((size_t)pl.machine.tiles);
		if (trace_tiles_parse(trace_tiles, pl.machine.tiles, sel, &e))
			fail(&e);
	}
	add_prov(&pl);
	Output *o = output_open(out_path, compress, &e), *to = NULL, *tr = NULL;
	if (!o)
		fail(&e);
	if ((tiles_path && !(to = output_open(tiles_path, 0, &e))) ||
	    (trace_path && !(tr = output_open(trace_path, 0, &e)))) {
		output_abort(o);
		if (to)
			output_abort(to);
		fail(&e);
	}
	if (capture_write(&pl, o, &e) || (to && capture_tiles_write(&pl, to, &e)) ||
	    (tr && trace_write(&pl, sel, tr, &e))) {
		output_abort(o);
		if (to)
			output_abort(to);
		if (tr)
			output_abort(tr);
		fail(&e);
	}
	if ((tr && output_commit(tr, &e)) || (to && output_commit(to, &e)) || output_commit(o, &e))
		fail(&e);
	free(sel);
	plan_free(&pl);
	return EXIT_OK;
}
