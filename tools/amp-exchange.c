/* amp-exchange: expanded stage -> exchange stage (phases, fragments). */
#include <getopt.h>

#include "exchange.h"
#include "plan.h"
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
	       "Exit status: 0 success, 1 bad input, 2 usage error.\n");
	exit(EXIT_OK);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "compress", no_argument, NULL, 'z' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0, 0, 0, 0 },
	};
	const char *out_path = NULL, *in_path = NULL;
	int compress = 0, c;
	Plan pl;
	Err e;

	opterr = 0;
	tool_init("amp-exchange");
	while ((c = getopt_long(argc, argv, ":o:z", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out_path = optarg; break;
		case 'z': compress = 1; break;
		case 'h': help(); break;
		case 'V': version(); break;
		default: bad_option(c, argv, optind, optopt);
		}
	}
	in_path = one_input(argc, argv, optind, "expanded stage");

	if (plan_read_stage(&pl, in_path, STAGE_EXPAND, &e) || plan_exchange(&pl, &e))
		fail(&e);
	write_plan(&pl, out_path, compress);
	plan_free(&pl);
	return EXIT_OK;
}
