/* run_save.c: amp-run --save, a run's outputs as .npy files (lib/run/run.h,
 * run_save). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/npy.h"
#include "run/run_int.h"

int run_save(const char *dir, const char *sub, const PTensor *t, const char *suffix, const float *v, Err *e)
{
	if (strchr(t->name, '/'))       /* a stage's names are not the model reader's: never leave DIR */
		return errf(e, "--save: tensor '%s' holds '/': its file would not be in %s", t->name, dir);
	char *where = sub ? xasprintf("%s/%s", dir, sub) : xstrdup(dir);
	if (sub && mkdir(where, 0777) != 0 && errno != EEXIST) {
		errf(e, "cannot create '%s': %s", where, strerror(errno));
		free(where);
		return -1;
	}
	char *path = xasprintf("%s/%s%s.npy", where, t->name, suffix);
	Npy a;
	memset(&a, 0, sizeof a);
	a.type = NPY_F32;
	a.rank = t->rank;
	memcpy(a.shape, t->shape, (size_t)t->rank * sizeof *t->shape);
	a.data = (void *)v;
	a.bytes = (size_t)tensor_count(t) * sizeof *v;
	int rc = npy_write(path, &a, e);
	free(path);
	free(where);
	return rc;
}
