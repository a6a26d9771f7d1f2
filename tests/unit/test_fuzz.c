/* Replays every fuzzing corpus (tests/fuzz/<reader>/: the seeds, and every
 * input a fuzzing campaign found crashing, kept as a regression case)
 * through its reader (tests/fuzz/readers.h). Each file is a case: the
 * reader returns, accepting or refusing it; under `make SAN=1 check` the
 * sanitizers also see every read and leak. */
#include <dirent.h>

#include "../fuzz/readers.h"
#include "t.h"

/* The file's bytes as they are (input_slurp would decompress zstd). */
static int raw_file(const char *path, char **data, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 1 << 16, n = 0, r;
	char *b = malloc(cap);
	while ((r = fread(b + n, 1, cap - n, f)) > 0)
		if ((n += r) == cap)
			b = realloc(b, cap *= 2);
	fclose(f);
	*data = b, *len = n;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
	for (int r = 0; r < FUZZ_READERS; r++) {
		char dir[256];
		snprintf(dir, sizeof dir, "tests/fuzz/%s", fuzz_readers[r].name);
		DIR *dp = opendir(dir);
		t_case("every reader has a corpus");
		CHECK(dp != NULL, "no corpus directory %s", dir);
		if (!dp)
			continue;
		char **names = NULL;
		int n = 0;
		for (struct dirent *de; (de = readdir(dp));)
			if (de->d_name[0] != '.') {
				names = realloc(names, (size_t)(n + 1) * sizeof *names);
				names[n++] = strdup(de->d_name);
			}
		closedir(dp);
		qsort(names, (size_t)n, sizeof *names, by_name);
		t_case("a corpus has seeds");
		CHECK(n >= 2, "%s holds %d files", dir, n);
		for (int i = 0; i < n; i++) {
			char path[600];
			char *data;
			size_t len;
			snprintf(path, sizeof path, "%s/%s", dir, names[i]);
			t_case("a corpus file replays through its reader");
			int ok = raw_file(path, &data, &len) == 0;
			CHECK(ok, "%s: cannot read it", path);
			if (ok) {
				fuzz_readers[r].fn((const uint8_t *)data, len);
				free(data);
			}
			free(names[i]);
		}
		free(names);
	}
	fuzz_cleanup();
	return t_summary();
}
