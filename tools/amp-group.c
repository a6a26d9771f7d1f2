/* amp-group: exchange stage -> grouped stage (merged phases, forwarding). */
#include <getopt.h>
#include <string.h>

#include "group.h"
#include "plan.h"
#include "tool.h"

static void help(void)
{
	printf("Usage: amp-group [OPTION]... [EXCHANGE]\n"
	       "Read an exchange stage (formats/exchange.md; standard input when absent or\n"
	       "'-'), merge adjacent phases that no compute step separates, and write\n"
	       "the grouped stage (formats/group.md). Every tile keeps its transfer order.\n"
	       "\n"
	       "      --weights MODE    how a parameter's home delivers a multicast:\n"
	       "                        'direct' (the home sends to every receiver),\n"
	       "                        'forward' (to the first tile of its receivers,\n"
	       "                        which forwards it to the rest in the same phase) or\n"
	       "                        'auto' (default: per phase, forward where that\n"
	       "                        phase's modelled cycles are fewer and its largest\n"
	       "                        table row no larger, else direct)\n"
	       "  -o, --output FILE     write to FILE, atomically (default: stdout)\n"
	       "  -z, --compress        compress the output with zstd\n"
	       "      --help            print this help and exit\n"
	       "      --version         print the version and exit\n"
	       "\n"
	       "Input compressed with zstd is recognised by its magic number.\n"
	       "Exit status: 0 success, 1 bad input, 2 usage error.\n");
	exit(EXIT_OK);
}

static int weights = WEIGHTS_DEFAULT;

static int option(int c, const char *arg)
{
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
	return plan_group(pl, weights, e);
}

static const struct option opts[] = {
	{ "weights", required_argument, NULL, 'W' },
	{ 0, 0, 0, 0 },
};

static const StageTool tool = {
	"amp-group", help, STAGE_EXCHANGE, "exchange stage", opts, "", option, run,
};

int main(int argc, char **argv)
{
	return stage_tool(&tool, argc, argv);
}
