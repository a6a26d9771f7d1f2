/* amp-exchange: expanded stage -> exchange stage (phases, fragments). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/exchange.h"
#include "stage/plan.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-exchange [OPTION]... [EXPANDED]\n"
	"Read an expanded stage (formats/expand.md; standard input when absent or\n"
	"'-'), make each sending copy step an exchange phase, join transfers that\n"
	"continue on the sender and every receiver, cut spans at\n"
	"max_transfer_bytes, and write the exchange stage (formats/exchange.md).\n";

static const char epilogue[] =
	"Input compressed with zstd is recognised by its magic number.\n"
	"Exit status: 0 success, 1 bad input or a write error, 2 usage error.\n";

static const StageTool tool = {
	"amp-exchange", usage, epilogue, STAGE_EXPAND, "expanded stage", NULL, NULL, plan_exchange,
};

int main(int argc, char **argv)
{
	return stage_tool(&tool, argc, argv);
}
