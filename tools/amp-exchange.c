/* amp-exchange: expanded stage -> exchange stage (phases, fragments). */
#include <getopt.h>

#include "lower/exchange.h"
#include "stage/plan.h"
#include "tool.h"

static void help(void)
{
	printf("Usage: amp-exchange [OPTION]... [EXPANDED]\n"
	       "Read an expanded stage (formats/expand.md; standard input when absent or\n"
	       "'-'), make each sending copy step an exchange phase, join transfers that\n"
	       "continue on the sender and every receiver, cut spans at\n"
	       "max_transfer_bytes, and write the exchange stage (formats/exchange.md).\n"
	       "\n"
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

static const StageTool tool = {
	"amp-exchange", help, STAGE_EXPAND, "expanded stage", NULL, "", NULL, plan_exchange,
};

int main(int argc, char **argv)
{
	return stage_tool(&tool, argc, argv);
}
