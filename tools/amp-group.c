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
	       "      --weights MODE    'direct' (default): a parameter's home multicasts\n"
	       "                        to every receiver; 'forward': it goes to the first\n"
	       "                        tile of its receivers, which forwards it to the rest\n"
	       "                        in the same phase (more table bytes and fragments\n"
	       "                        on that tile, and more modelled cycles, on every\n"
	       "                        model measured; kept for comparison)\n"
	       "  -o, --output FILE     write to FILE, atomically (default: stdout)\n"
	       "  -z, --compress        compress the output with zstd\n"
	       "      --help            print this help and exit\n"
	       "      --version         print the version and exit\n"
	       "\n"
	       "Input compressed with zstd is recognised by its magic number.\n"
	       "Exit status: 0 success, 1 bad input, 2 usage error.\n");
	exit(EXIT_OK);
}

static int direct = WEIGHTS_DIRECT_DEFAULT;

static int option(int c, const char *arg)
{
	if (c != 'W')
		return -1;
	if (strcmp(arg, "direct") == 0)
		direct = 1;
	else if (strcmp(arg, "forward") == 0)
		direct = 0;
	else
		usage_error("--weights takes 'forward' or 'direct', not '%s'", arg);
	return 0;
}

static int run(Plan *pl, Err *e)
{
	return plan_group(pl, direct, e);
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
