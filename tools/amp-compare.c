/* amp-compare: two captures -> their summaries, ops, phases (lined up by
 * label), movement classes and per-tile figures side by side, with deltas
 * (formats/compare.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "study/compare.h"
#include "base/json.h"
#include "tool.h"
#include "base/yio.h"

static const char usage[] =
	"Usage: amp-compare [OPTION]... A B\n"
	"Compare two captures written by amp-capture (formats/capture.md), A the\n"
	"baseline and B the variant: every summary figure with B - A and the\n"
	"change in percent (the bound's and the floors' figures among them;\n"
	"ratios are left out);\n"
	"each op's compute, exchange and total cycles; the phases lined up by\n"
	"their labels (op.operand of each copy), not by position; the movement\n"
	"classes; and with --tiles the per-tile figures.\n"
	"\n"
	"Phases: partners (phases sharing a label) always sit in one group, so\n"
	"every label both captures have pairs its phases; groups keep each\n"
	"capture's order, and inside a group phases pair one to one, equal label\n"
	"sets first, then the most shared labels. A line is 'same', 'changed'\n"
	"(paired, labels differ), 'regrouped' (unpaired, sharing a label with\n"
	"the other side's phases of its group), 'removed' (A only: B has none\n"
	"of its labels) or 'added' (B only); transfers and cycles count every\n"
	"run, and a total row equals each summary's.\n"
	"Movement classes (phase_traffic) are summed over every run by op,\n"
	"operand and movement: sends, bytes sent and bytes received.\n"
	"Ops are matched by name, A's order first; an op or class on one side\n"
	"only shows '-' on the other; a figure that names a tile, phase or step\n"
	"has no delta. The output is text, or one JSON document (--json), or TSV\n"
	"(--tsv), formats/compare.md.\n";

static const char epilogue[] =
	"Exit status: 0 success, 1 bad input or a write error, 2 usage error.\n";

static const Opt opts[] = {
	{ 'N', 0, "names", OPT_ARG, "A,B", NULL,
	  "names for the two columns (default: A,B)" },
	{ 'T', 0, "tiles", OPT_ARG, "FA,FB", "file",
	  "the two captures' tiles files (amp-capture --tiles):\n"
	  "each per-tile figure's max, median and the tile\n"
	  "that grows the most; --json adds every tile's\n"
	  "deltas, --tsv the tiles that differ" },
	{ 'J', 0, "json", OPT_NOARG, NULL, NULL,
	  "write JSON instead of text" },
	{ 'S', 0, "tsv", OPT_NOARG, NULL, NULL,
	  "write TSV for scripts: a line per compared figure" },
	{ 'o', 'o', "output", OPT_ARG, "FILE", "file",
	  "write to FILE, atomically (default: stdout)" },
	{ 0 },
};

static const OptTool tool = { "amp-compare", usage, opts, epilogue };

/* A tiles file for capture c: read, and its tile count the capture's. */
static void load_tiles(TileFigs *t, const char *path, const Cap *c)
{
	Err e;
	if (tiles_load(t, path, &e))
		fail(&e);
	if (c->tiles && t->ntiles != c->tiles) {
		err_at(&e, path, 1, 1, "%d tiles, but capture '%s' has %lld: not its tiles file", t->ntiles, c->r.name,
		       (long long)c->tiles);
		fail(&e);
	}
}

int main(int argc, char **argv)
{
	const char *out_path = NULL;
	char *na = NULL, *nb = NULL;
	const char *tiles_arg = NULL;
	int json = 0, tsv_out = 0, c;
	Cap a, b;
	TileFigs ta, tb;
	Err e;

	OptParse op;
	const char *arg;
	opt_init(&op, &tool, argc, argv);
	while ((c = opt_next(&op, &arg)) != -1) {
		switch (c) {
		case 'N': {
			const char *comma = strchr(arg, ',');
			if (!comma || comma == arg || !comma[1] || strchr(comma + 1, ',') || strpbrk(arg, " \t\n"))
				usage_error("--names takes two names without spaces, 'A,B', not '%s'", arg);
			free(na), free(nb);
			na = xasprintf("%.*s", (int)(comma - arg), arg);
			nb = xstrdup(comma + 1);
			break;
		}
		case 'T': {
			const char *comma = strchr(arg, ',');
			if (!comma || comma == arg || !comma[1] || strchr(comma + 1, ','))
				usage_error("--tiles takes two tiles files, one for A and one for B, 'FA,FB', not '%s'",
					    arg);
			tiles_arg = arg;
			break;
		}
		case 'J': json = 1; break;
		case 'S': tsv_out = 1; break;
		case 'o': out_path = arg; break;
		}
	}
	if (argc - op.optind != 2)
		usage_error("two captures to compare, A and B; found %d", argc - op.optind);
	if (!strcmp(argv[op.optind], "-") && !strcmp(argv[op.optind + 1], "-"))
		usage_error("only one of A and B can be standard input");
	if (json && tsv_out)
		usage_error("--json and --tsv are two outputs: choose one");
	char *fa = tiles_arg ? xstrdup(tiles_arg) : NULL, *fb = fa ? strchr(fa, ',') : NULL;
	if (fb)
		*fb++ = 0;
	distinct_outputs((ToolFile[]){ { "-o", out_path }, { "A", argv[op.optind] }, { "B", argv[op.optind + 1] },
				       { "--tiles", fa }, { "--tiles", fb } }, 1, 5);
	if (cap_load(&a, argv[op.optind], &e) || cap_load(&b, argv[op.optind + 1], &e))
		fail(&e);
	Compare m;
	cmp_build(&m, &a, &b, na ? na : "A", nb ? nb : "B");
	if (fa) {
		load_tiles(&ta, fa, &a);
		load_tiles(&tb, fb, &b);
		m.tiles[0] = &ta, m.tiles[1] = &tb;
	}
	free(fa);
	Output *o = output_open(out_path, 0, &e);
	if (!o)
		fail(&e);
	if (compare_write(o, &m, json ? COMPARE_JSON : tsv_out ? COMPARE_TSV : COMPARE_TEXT, &e)) {
		output_abort(o);
		fail(&e);
	}
	if (output_commit(o, &e))
		fail(&e);
	cmp_free(&m);
	if (tiles_arg)
		tiles_free(&ta), tiles_free(&tb);
	cap_free(&a);
	cap_free(&b);
	free(na), free(nb);
	return EXIT_OK;
}
