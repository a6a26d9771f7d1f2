/* The libFuzzer harness of one reader (`make fuzz`): built once per reader
 * with -DFUZZ_READER='"model"' (a name from readers.h) by clang with
 * -fsanitize=fuzzer,address,undefined. */
#include "readers.h"

static FuzzFn reader(void)
{
	static FuzzFn fn;
	for (int i = 0; !fn && i < FUZZ_READERS; i++)
		if (strcmp(fuzz_readers[i].name, FUZZ_READER) == 0)
			fn = fuzz_readers[i].fn;
	if (!fn)
		abort();
	return fn;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	atexit(fuzz_cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	return reader()(d, n);
}
