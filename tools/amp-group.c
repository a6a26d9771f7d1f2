/* amp-group: exchange stage -> grouped stage (merged phases, forwarding). */
#include <getopt.h>
#include <string.h>

#include "lower/group.h"
#include "stage/plan.h"
#include "lower/schedule.h"
#include "tool.h"

static void help(void)
{
	printf("Usage: amp-group [OPTION]... [EXCHANGE]\n"
	       "Read an exchange stage (formats/exchange.md; standard input when absent or\n"
	       "'-'), merge adjacent phases that no compute step separates, and write\n"
	       "the grouped stage (formats/group.md). Then order every phase's transfers\n"
	       "to shorten its modelled exchange (the replay): within each copy step,\n"
	       "of every (sender, first receiver) pair's next fragments the one that can\n"
	       "start earliest goes first; steps keep program order on every tile, and a\n"
	       "step that forwards bytes it receives keeps record order. A phase takes\n"
	       "the new order only when it is faster by at least a cycle (one run) for\n"
	       "each record it adds; when the tables would then pass a limit of\n"
	       "the machine, only orders that grow no tile's row are taken.\n"
	       "\n"
	       "      --weights MODE    how a parameter's home delivers a multicast:\n"
	       "                        'direct' (the home sends to every receiver),\n"
	       "                        'forward' (to the first tile of its receivers,\n"
	       "                        which forwards it to the rest in the same phase) or\n"
	       "                        'auto' (default: per phase, forward where that\n"
	       "                        phase's modelled cycles are fewer and its largest\n"
	       "                        table row no larger, else direct)\n"
	       "      --schedule MODE   'list' (default: the order above) or 'record'\n"
	       "                        (record order, which is program order)\n"
	       "  -v, --verbose         report the phases reordered and the exchange\n"
	       "                        cycles before and after (each phase once) on stderr\n"
	       "  -o, --output FILE     write to FILE, atomically (default: stdout)\n"
	       "  -z, --compress        compress the output with zstd\n"
	       "      --help            print this help and exit\n"
	       "      --version         print the version and exit\n"
	       "\n"
	       "Input compressed with zstd is recognised by its magic number.\n"
	       "Exit status: 0 success, 1 bad input or a write error, 2 usage error.\n"
	       "Long options are whole words: an abbreviation is a usage error.\n" HELP_DOCS);
	exit(EXIT_OK);
}

static int weights = WEIGHTS_DEFAULT;
static int greedy = 1, verbose;

static int option(int c, const char *arg)
{
	if (c == 'v') {
		verbose = 1;
		return 0;
	}
	if (c == 'S') {
		if (strcmp(arg, "list") && strcmp(arg, "record"))
			usage_error("--schedule takes 'list' or 'record', not '%s'", arg);
		greedy = !strcmp(arg, "list");
		return 0;
	}
	if (c != 'W')
		return -1;
	for (weights = 0; weights <= WEIGHTS_AUTO && strcmp(arg, weights_name(weights)); weights++)
		;
	if (weights > WEIGHTS_AUTO)
		usage_error("--weights takes 'forward', 'direct' or 'auto', not '%s'", arg);
	return 0;
}

static int run(Plan *pl, Err *e)
{
	if (plan_group(pl, weights, e))
		return -1;
	if (!greedy)
		return 0;
	ScheduleStats st;
	if (plan_schedule(pl, SCHEDULE_CYCLES_PER_RECORD, &st, e))
		return -1;
	if (verbose)
		fprintf(stderr, "amp-group: %d of %d phases reordered; exchange %lld -> %lld cycles (each phase once)\n",
			st.phases, pl->nph, (long long)st.before, (long long)st.after);
	return 0;
}

static const struct option opts[] = {
	{ "weights", required_argument, NULL, 'W' },
	{ "schedule", required_argument, NULL, 'S' },
	{ "verbose", no_argument, NULL, 'v' },
	{ 0, 0, 0, 0 },
};

static const StageTool tool = {
	"amp-group", help, STAGE_EXCHANGE, "exchange stage", opts, "v", option, run,
};

int main(int argc, char **argv)
{
	return stage_tool(&tool, argc, argv);
}
