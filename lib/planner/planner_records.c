/* planner_records.c: the plan under construction: adding tensors,
 * placements and steps (planner_int.h). Every other part of the planner
 * builds through these; they call none of it. */
#include "planner/planner_int.h"

/* ---- records ---- */

int planner_add_tensor(Plan *pl, const char *name, PRole role, int rank, const int64_t *shape,
		       Format fmt, int scale)
{
	PTensor t;
	memset(&t, 0, sizeof t);
	t.name = xstrdup(name);
	t.role = role;
	t.rank = rank;
	memcpy(t.shape, shape, (size_t)rank * sizeof *shape);
	t.fmt = fmt;
	t.scale = scale;
	t.count = 1;
	pl->t = xrealloc(pl->t, (size_t)(pl->nt + 1) * sizeof *pl->t);
	pl->t[pl->nt] = t;
	return pl->nt++;
}

/* Adds p under name (made unique), or returns the identical placement that
 * already exists and sets *existed. */
int planner_add_place(Plan *pl, Placement *p, int tensor, const char *name, int *existed)
{
	const PTensor *t = &pl->t[tensor];

	p->tensor = tensor;
	p->fmt = t->fmt;
	p->rank = t->rank;
	if (place_windowed(p))          /* the caller set the window: off, shape and whole */
		memcpy(p->whole, t->shape, sizeof p->whole);
	else
		memcpy(p->shape, t->shape, sizeof p->shape), memset(p->whole, 0, sizeof p->whole);
	*existed = 0;
	for (int i = 0; i < pl->np; i++)
		if (place_same(&pl->p[i], p)) {
			*existed = 1;
			return i;
		}
	char *buf = xasprintf("%s@%s", t->name, name);
	for (int n = 2;; n++) {
		int clash = 0;
		for (int i = 0; i < pl->np && !clash; i++)
			clash = strcmp(pl->p[i].name, buf) == 0;
		if (!clash)
			break;
		free(buf);
		buf = xasprintf("%s@%s.%d", t->name, name, n);
	}
	p->name = buf;
	pl->p = xrealloc(pl->p, (size_t)(pl->np + 1) * sizeof *pl->p);
	pl->p[pl->np] = *p;
	return pl->np++;
}

int planner_add_place_of(Plan *pl, Placement *p, int tensor, const char *op, const char *what, int *existed)
{
	char *name = xasprintf("%s.%s", op, what);
	int i = planner_add_place(pl, p, tensor, name, existed);
	free(name);
	return i;
}

/* A copy of a placement onto itself (a result already in the cut its
 * copy was to reach: a GEMM's unpacked rows that are the canonical cut)
 * moves nothing, and is not recorded. */
void planner_add_copy(Plan *pl, const char *op, Operand opd, Movement mv, int src, int dst)
{
	if (src == dst)
		return;
	Step s;
	memset(&s, 0, sizeof s);
	s.kind = STEP_COPY;
	s.op = xstrdup(op);
	s.operand = opd;
	s.move = mv;
	s.src = src;
	s.dst = dst;
	s.map = copy_mapping(&pl->p[src], &pl->p[dst]);
	pl->s = xrealloc(pl->s, (size_t)(pl->ns + 1) * sizeof *pl->s);
	pl->s[pl->ns++] = s;
}

int planner_add_compute(Plan *pl, const char *op, ComputeKind k, const int *in, int nin,
			int out, double eps)
{
	Step s;
	memset(&s, 0, sizeof s);
	s.kind = STEP_COMPUTE;
	s.op = xstrdup(op);
	s.compute = k;
	memcpy(s.in, in, (size_t)nin * sizeof *in);
	s.nin = nin;
	s.out = out;
	s.eps = eps;
	pl->s = xrealloc(pl->s, (size_t)(pl->ns + 1) * sizeof *pl->s);
	pl->s[pl->ns++] = s;
	return pl->ns - 1;
}

int64_t planner_largest_uniform(int64_t n, int64_t limit)
{
	int64_t p = n < limit ? n : limit;
	while (p > 1 && !uniform_ok(n, p))
		p--;
	return p;
}
