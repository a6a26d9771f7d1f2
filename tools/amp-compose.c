/* amp-compose: plan -> plan, joining conversions with their replication. */
#include <getopt.h>

#include "compose.h"
#include "plan.h"
#include "tool.h"

static void help(void)
{
	printf("Usage: amp-compose [OPTION]... [PLAN]\n"
	       "Read a plan stage (formats/plan.md; standard input when absent or '-'),\n"
	       "apply composition (DOMAIN §5: a conversion followed by a replication\n"
	       "becomes one copy when the conversion is an identity-layout or\n"
	       "native-panel mapping) and write the plan.\n"
	       "\n"
	       "      --no-compose      pass the plan through unchanged (for comparison)\n"
	       "  -v, --verbose         report the number of joined copies on stderr\n"
	       "  -o, --output FILE     write to FILE, atomically (default: stdout)\n"
	       "  -z, --compress        compress the output with zstd\n"
	       "      --help            print this help and exit\n"
	       "      --version         print the version and exit\n"
	       "\n"
	       "Input compressed with zstd is recognised by its magic number.\n"
	       "Exit status: 0 success, 1 bad input, 2 usage error.\n");
	exit(EXIT_OK);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "no-compose", no_argument, NULL, 'N' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "output", required_argument, NULL, 'o' },
		{ "compress", no_argument, NULL, 'z' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0, 0, 0, 0 },
	};
	const char *out_path = NULL, *in_path = NULL;
	int compress = 0, compose = 1, verbose = 0, c;
	Plan pl;
	Err e;

	opterr = 0;
	tool_init("amp-compose");
	while ((c = getopt_long(argc, argv, ":vo:z", opts, NULL)) != -1) {
		switch (c) {
		case 'N': compose = 0; break;
		case 'v': verbose = 1; break;
		case 'o': out_path = optarg; break;
		case 'z': compress = 1; break;
		case 'h': help(); break;
		case 'V': version(); break;
		default: bad_option(c, argv, optind, optopt);
		}
	}
	in_path = one_input(argc, argv, optind, "plan file");

	if (plan_read(&pl, in_path, &e))
		fail(&e);
	if (compose) {
		int joined = plan_compose(&pl);
		if (verbose)
			fprintf(stderr, "amp-compose: joined %d copies\n", joined);
		if (plan_check(&pl, "composed plan", &e))
			fail(&e);
	}
	write_plan(&pl, out_path, compress);
	plan_free(&pl);
	return EXIT_OK;
}
