/* amp-expand: plan -> expanded stage (addresses and transfers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/expand.h"
#include "stage/plan.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-expand [OPTION]... [PLAN]\n"
	"Read a plan stage (formats/plan.md; standard input when absent or '-'),\n"
	"give every placement its SRAM address, expand every copy into byte\n"
	"transfers (multicast requests, local copies, zero padding) folded into\n"
	"regular families, and write the expanded stage (formats/expand.md).\n";

static const char epilogue[] =
	"Input compressed with zstd is recognised by its magic number.\n"
	"Exit status: 0 success, 1 bad input, a limit exceeded (SRAM) or a write\n"
	"error, 2 usage error.\n";

static const StageTool tool = {
	"amp-expand", usage, epilogue, STAGE_PLAN, "plan file", NULL, NULL, plan_expand,
};

int main(int argc, char **argv)
{
	return stage_tool(&tool, argc, argv);
}
