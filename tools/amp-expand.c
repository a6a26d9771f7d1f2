/* amp-expand: plan -> expanded stage (addresses and transfers). */
#include <getopt.h>

#include "expand.h"
#include "plan.h"
#include "tool.h"

static void help(void)
{
	printf("Usage: amp-expand [OPTION]... [PLAN]\n"
	       "Read a plan stage (formats/plan.md; standard input when absent or '-'),\n"
	       "give every placement its SRAM address, expand every copy into byte\n"
	       "transfers (multicast requests, local copies, zero padding) folded into\n"
	       "regular families, and write the expanded stage (formats/expand.md).\n"
	       "\n"
	       "  -o, --output FILE     write to FILE, atomically (default: stdout)\n"
	       "  -z, --compress        compress the output with zstd\n"
	       "      --help            print this help and exit\n"
	       "      --version         print the version and exit\n"
	       "\n"
	       "Input compressed with zstd is recognised by its magic number.\n"
	       "Exit status: 0 success, 1 bad input or a limit exceeded (SRAM), 2 usage error.\n");
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
	tool_init("amp-expand");
	while ((c = getopt_long(argc, argv, ":o:z", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out_path = optarg; break;
		case 'z': compress = 1; break;
		case 'h': help(); break;
		case 'V': version(); break;
		default: bad_option(c, argv, optind, optopt);
		}
	}
	in_path = one_input(argc, argv, optind, "plan file");

	if (plan_read(&pl, in_path, &e) || plan_expand(&pl, &e))
		fail(&e);
	write_plan(&pl, out_path, compress);
	plan_free(&pl);
	return EXIT_OK;
}
