/* amp-group: exchange stage -> grouped stage (merged phases, forwarding). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/group.h"
#include "stage/plan.h"
#include "lower/lower.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-group [OPTION]... [EXCHANGE]\n"
	"Read an exchange stage (formats/exchange.md; standard input when absent or\n"
	"'-'), merge adjacent phases that no compute step separates, and write\n"
	"the grouped stage (formats/group.md). Then order every phase's transfers\n"
	"to shorten its modelled exchange (the replay): within each copy step,\n"
	"of every (sender, first receiver) pair's next fragments the one that can\n"
	"start earliest goes first, or the fragments go in an all-to-all's rounds\n"
	"(by receiver's offset from sender), whichever replays faster; steps keep\n"
	"program order on every tile, and a step that forwards bytes it receives\n"
	"keeps record order. A phase takes\n"
	"the new order only when it is faster by at least a cycle (one run) for\n"
	"each record it adds; when the tables would then pass a limit of\n"
	"the machine, only orders that grow no tile's row are taken.\n";

static const char epilogue[] =
	"Input compressed with zstd is recognised by its magic number.\n"
	"Exit status: 0 success, 1 bad input or a write error, 2 usage error.\n";

static const Opt opts[] = {
	{ 'W', 0, "weights", OPT_ARG, "MODE", "words:auto direct forward",
	  "how a parameter's home delivers a multicast:\n"
	  "'direct' (the home sends to every receiver),\n"
	  "'forward' (to the first tile of its receivers,\n"
	  "which forwards it to the rest in the same phase) or\n"
	  "'auto' (default: per phase, forward where that\n"
	  "phase's modelled cycles are fewer and its largest\n"
	  "table row no larger, else direct)" },
	{ 'S', 0, "schedule", OPT_ARG, "MODE", "words:list record",
	  "'list' (default: the order above) or 'record'\n"
	  "(record order, which is program order)" },
	{ 'v', 'v', "verbose", OPT_NOARG, NULL, NULL,
	  "report the phases reordered and the exchange\n"
	  "cycles before and after (each phase once) on stderr" },
	{ 0 },
};

static int weights = WEIGHTS_DEFAULT;
static int greedy = 1, verbose;

static void option(int c, const char *arg)
{
	if (c == 'v') {
		verbose = 1;
	} else if (c == 'S') {
		if (strcmp(arg, "list") && strcmp(arg, "record"))
			usage_error("--schedule takes 'list' or 'record', not '%s'", arg);
		greedy = !strcmp(arg, "list");
	} else {
		for (weights = 0; weights <= WEIGHTS_AUTO && strcmp(arg, weights_name(weights)); weights++)
			;
		if (weights > WEIGHTS_AUTO)
			usage_error("--weights takes 'forward', 'direct' or 'auto', not '%s'", arg);
	}
}

static int run(Plan *pl, Err *e)
{
	ScheduleStats st;
	if (lower_group(pl, weights, greedy, &st, e))
		return -1;
	if (verbose && greedy)
		fprintf(stderr, "amp-group: %d of %d phases reordered; exchange %lld -> %lld cycles (each phase once)\n",
			st.phases, pl->nph, (long long)st.before, (long long)st.after);
	return 0;
}

static const StageTool tool = {
	"amp-group", usage, epilogue, STAGE_EXCHANGE, "exchange stage", opts, option, run,
};

int main(int argc, char **argv)
{
	return stage_tool(&tool, argc, argv);
}
