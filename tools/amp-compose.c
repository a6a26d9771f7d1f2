/* amp-compose: plan -> plan, joining conversions with their replication
 * and moving parameter copies ahead of compute that does not need them. */
#include <getopt.h>

#include "lower/compose.h"
#include "stage/plan.h"
#include "stage/plan_check.h"
#include "tool.h"

static void help(void)
{
	printf("Usage: amp-compose [OPTION]... [PLAN]\n"
	       "Read a plan stage (formats/plan.md; standard input when absent or '-'),\n"
	       "apply composition (a conversion followed by a replication becomes one\n"
	       "copy when the conversion is an identity-layout or native-panel mapping;\n"
	       "then a run of parameter-vector copies moves ahead of the compute steps before\n"
	       "it when none of them touches those parameters, so that it joins the\n"
	       "previous exchange phase; docs/machine.md §5) and write the plan.\n"
	       "\n"
	       "      --no-compose      pass the plan through unchanged (for comparison)\n"
	       "  -v, --verbose         report the copies joined and moved on stderr\n"
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

static int compose = 1, verbose;

static int option(int c, const char *arg)
{
	(void)arg;
	if (c == 'N')
		compose = 0;
	else if (c == 'v')
		verbose = 1;
	else
		return -1;
	return 0;
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

static const struct option opts[] = {
	{ "no-compose", no_argument, NULL, 'N' },
	{ "verbose", no_argument, NULL, 'v' },
	{ 0, 0, 0, 0 },
};

static const StageTool tool = {
	"amp-compose", help, STAGE_PLAN, "plan file", opts, "v", option, run,
};

int main(int argc, char **argv)
{
	return stage_tool(&tool, argc, argv);
}
