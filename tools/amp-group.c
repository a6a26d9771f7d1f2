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
	       "'-'), merge adjacent phases that no compute step separates, deliver\n"
	       "parameters through a forwarding tile, and write the grouped stage\n"
	       "(formats/group.md). Every tile keeps its transfer order.\n"
	       "\n"
	       "      --weights MODE    'forward' (default): a parameter goes from its home\n"
	       "                        to the first tile of its receivers, which forwards\n"
	       "                        it to the rest in the same phase; 'direct': the\n"
	       "                        home multicasts to every receiver\n"
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
		{ "weights", required_argument, NULL, 'W' },
		{ "output", required_argument, NULL, 'o' },
		{ "compress", no_argument, NULL, 'z' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0, 0, 0, 0 },
	};
	const char *out_path = NULL, *in_path = NULL;
	int compress = 0, direct = 0, c;
	Plan pl;
	Err e;

	opterr = 0;
	tool_init("amp-group");
	while ((c = getopt_long(argc, argv, ":o:z", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out_path = optarg; break;
		case 'z': compress = 1; break;
		case 'W':
			if (strcmp(optarg, "direct") == 0)
				direct = 1;
			else if (strcmp(optarg, "forward") == 0)
				direct = 0;
			else
				usage_error("--weights takes 'forward' or 'direct', not '%s'", optarg);
			break;
		case 'h': help(); break;
		case 'V': version(); break;
		default: bad_option(c, argv, optind, optopt);
		}
	}
	in_path = one_input(argc, argv, optind, "exchange stage");

	if (plan_read_stage(&pl, in_path, STAGE_EXCHANGE, &e) || plan_group(&pl, direct, &e))
		fail(&e);
	write_plan(&pl, out_path, compress);
	plan_free(&pl);
	return EXIT_OK;
}
