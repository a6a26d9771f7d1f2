/* amp-compose: plan -> plan, joining conversions with their replication
 * and moving parameter copies ahead of compute that does not need them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/compose.h"
#include "stage/plan.h"
#include "stage/plan_check.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-compose [OPTION]... [PLAN]\n"
	"Read a plan stage (formats/plan.md; standard input when absent or '-'),\n"
	"apply composition (a conversion followed by a replication becomes one\n"
	"copy when the conversion is an identity-layout or native-panel mapping;\n"
	"then a run of parameter-vector copies moves ahead of the compute steps before\n"
	"it when none of them touches those parameters, so that it joins the\n"
	"previous exchange phase; docs/machine.md §5) and write the plan.\n";

static const char epilogue[] =
	"Input compressed with zstd is recognised by its magic number.\n"
	"Exit status: 0 success, 1 bad input or a write error, 2 usage error.\n";

static const Opt opts[] = {
	{ 'N', 0, "no-compose", OPT_NOARG, NULL, NULL,
	  "pass the plan through unchanged (for comparison)" },
	{ 'v', 'v', "verbose", OPT_NOARG, NULL, NULL,
	  "report the copies joined and moved on stderr" },
	{ 0 },
};

static int compose = 1, verbose;

static void option(int c, const char *arg)
{
	(void)arg;
	if (c == 'N')
		compose = 0;
	else
		verbose = 1;
}

static int run(Plan *pl, Err *e)
{
	if (!compose)
		return 0;
	int joined = plan_join(pl), moved = plan_hoist(pl);     /* plan_compose, counted */
	if (verbose)
		fprintf(stderr, "amp-compose: joined %d copies, moved %d parameter copies ahead of compute\n",
			joined, moved);
	return plan_check(pl, "composed plan", e);
}

static const StageTool tool = {
	"amp-compose", usage, epilogue, STAGE_PLAN, "plan file", opts, option, run,
};

int main(int argc, char **argv)
{
	return stage_tool(&tool, argc, argv);
}
