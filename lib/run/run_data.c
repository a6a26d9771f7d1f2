/* run_data.c: the values of a program's inputs and parameters (lib/run/run.h,
 * run_data): read from --data's .npy files or made from the seed, normal
 * values whose deviation follows how each tensor is used; a stacked
 * parameter made from the seed only an instance at a time (lazy), and the
 * cache through which the reference decodes the instances the machine
 * encoded instead of making them again. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/npy.h"
#include "base/num.h"
#include "run/run_int.h"

/* ---- data ---- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30, x *= 0xBF58476D1CE4E5B9u;
	x ^= x >> 27, x *= 0x94D049BB133111EBu;
	return x ^ (x >> 31);
}

/* Normal values from a seed and a name (Box-Muller): value i depends only
 * on (seed, name, i) (pair i & ~1 gives its cosine and sine halves), so
 * any range, split any way, gives the same values. Values lo .. hi - 1
 * into v[lo - base ..], then quantized into fmt when asked. */
typedef struct {
	float *v;
	uint8_t *enc;           /* also encoded here, in fmt (NULL: no) */
	int64_t base, lo, hi;
	uint64_t s;
	double mean, sd;
	Format fmt;
	int scale, quantized;
} Gen;

static void *gen_part(void *arg)
{
	const Gen *g = arg;
	for (int64_t i = g->lo & ~(int64_t)1; i < g->hi; i += 2) {
		double u1 = ((mix(g->s + 2 * (uint64_t)i) >> 11) + 1.0) / 9007199254740993.0;
		double u2 = (mix(g->s + 2 * (uint64_t)i + 1) >> 11) / 9007199254740992.0;
		double r = sqrt(-2 * log(u1)), th = 6.283185307179586 * u2;
		double c = cos(th), s = sin(th);        /* one sincos call (GCC joins them; same bits) */
		if (i >= g->lo)
			g->v[i - g->base] = (float)(g->mean + g->sd * r * c);
		if (i + 1 < g->hi)
			g->v[i + 1 - g->base] = (float)(g->mean + g->sd * r * s);
	}
	uint8_t *enc = g->enc ? g->enc + (g->lo - g->base) * fmt_bytes(g->fmt) : NULL;
	if (g->quantized)
		run_quantize_encode(g->v + (g->lo - g->base), g->hi - g->lo, g->fmt, g->scale, enc);
	else if (enc)
		run_encode_run(g->v + (g->lo - g->base), NULL, g->hi - g->lo, g->fmt, g->scale, enc);
	return NULL;
}

/* Values first .. first + n - 1 into v, on two threads; encoded into enc
 * too unless it is NULL. */
static void normals(float *v, uint8_t *enc, int64_t first, int64_t n, uint64_t seed, const char *name, double mean,
		    double sd, Format fmt, int scale, int quantized)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15u;
	for (const char *c = name; *c; c++)
		s = mix(s ^ (uint8_t)*c);
	int64_t mid = n >= 1 << 16 ? first + n / 2 : first + n;
	Gen a = { v, enc, first, first, mid, s, mean, sd, fmt, scale, quantized }, b = a;
	pthread_t th;
	b.lo = mid, b.hi = first + n;
	if (mid < first + n && sim_threads() > 1 && pthread_create(&th, NULL, gen_part, &b) == 0) {
		gen_part(&a);
		pthread_join(th, NULL);
	} else {
		a.hi = first + n;
		gen_part(&a);
	}
}

/* A plan tensor's Dist (run_int.h says how it is chosen). */
static Dist plan_dist(const Plan *pl, int t)
{
	for (int h = 0; h < pl->nh; h++)
		if (pl->h[h].kind == HOST_EMBED && pl->h[h].in == t)
			return (Dist){ 0, 0, pl->t[pl->h[h].table].shape[pl->h[h].transposed ? 1 : 0] };
	if (pl->t[t].role == R_INPUT)
		return (Dist){ 0, 1, 0 };
	for (int g = 0; g < pl->ng; g++) {
		if (pl->g[g].b == t)
			return (Dist){ 0, 1 / sqrt((double)pl->g[g].k), 0 };
		if (pl->g[g].bias == t)
			return (Dist){ 0, 0.02, 0 };
	}
	for (int s = 0; s < pl->ns; s++)
		if (pl->s[s].kind == STEP_COMPUTE &&
		    (pl->s[s].compute == C_LAYERNORM || pl->s[s].compute == C_RMSNORM ||
		     (pl->s[s].compute == C_MUL && pl->p[pl->s[s].in[1]].rank == 1)) &&  /* (a folded rmsnorm's, a mul's) */
		    pl->p[pl->s[s].in[1]].tensor == t)
			return (Dist){ 1, 0.1, 0 };
	return (Dist){ 0, 0.02, 0 };
}

/* The same from the model's ops alone. */
Dist run_model_dist(const Model *m, int t)
{
	for (int k = 0; k < m->nops; k++)
		if (m->ops[k].kind == OP_EMBED && m->ops[k].in[0] == t)
			return (Dist){ 0, 0, m->t[m->ops[k].in[1]].shape[m->ops[k].transposed ? 1 : 0] };
	if (m->t[t].role == T_INPUT)
		return (Dist){ 0, 1, 0 };
	for (int k = 0; k < m->nops; k++) {
		const MOp *op = &m->ops[k];
		if (op->kind == OP_MATMUL && op->in[1] == t)
			return (Dist){ 0, 1 / sqrt((double)m->t[t].shape[0]), 0 };
		if (op->kind == OP_MATMUL && op->in[2] == t)
			return (Dist){ 0, 0.02, 0 };
	}
	for (int k = 0; k < m->nops; k++)
		if ((m->ops[k].kind == OP_LAYERNORM || m->ops[k].kind == OP_RMSNORM || m->ops[k].kind == OP_MUL) &&
		    m->ops[k].in[1] == t && m->t[t].role == T_PARAM)      /* a scale: a norm's, or per channel */
			return (Dist){ 1, 0.1, 0 };
	return (Dist){ 0, 0.02, 0 };
}

int run_same_spec(const DataSpec *a, const DataSpec *b)
{
	if (strcmp(a->name, b->name) || a->rank != b->rank || a->count != b->count || a->fmt != b->fmt ||
	    (a->fmt == FMT_FP8 && a->scale != b->scale) || a->d.mean != b->d.mean || a->d.sd != b->d.sd ||
	    a->d.vocab != b->d.vocab)
		return 0;
	for (int k = 0; k < a->rank; k++)
		if (a->shape[k] != b->shape[k])
			return 0;
	return 1;
}

int64_t run_spec_values(const DataSpec *x)
{
	int64_t n = x->count;
	for (int k = 0; k < x->rank; k++)
		n *= x->shape[k];
	return n;
}

/* DIR/<name>.npy for x when --data has it (free it), else NULL. */
static char *data_file(const DataSpec *x, const RunOpts *o)
{
	struct stat st;
	const char *dir = x->param && o->weights_dir ? o->weights_dir : o->data_dir;
	if (!dir || strchr(x->name, '/'))      /* never a file outside DIR (run_tensor_data refuses it) */
		return NULL;
	char *path = xasprintf("%s/%s.npy", dir, x->name);
	if (stat(path, &st) == 0)
		return path;
	free(path);
	return NULL;
}

/* A stacked parameter made from the seed is kept by no one whole: each
 * user makes the instance it needs (run_instance_data), so 27 layers of
 * weights never sit in memory as floats. */
int run_lazy_spec(const DataSpec *x, const RunOpts *o)
{
	if (x->count < 2 || !o->quantized)
		return 0;
	char *path = data_file(x, o);
	free(path);
	return path == NULL;
}

/* Token ids: n uniform in 0 .. vocab - 1, value i from (seed, name, i). */
static void token_ids(float *v, int64_t first, int64_t n, uint64_t seed, const char *name, int64_t vocab)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15u ^ 0x1D5;
	for (const char *c = name; *c; c++)
		s = mix(s ^ (uint8_t)*c);
	for (int64_t i = 0; i < n; i++)
		v[i] = (float)(mix(s + (uint64_t)(first + i)) % (uint64_t)vocab);
}

/* An embed's rows: ids [rows] into table [V, C] (or [C, V], transposed)
 * as y [rows, C]. */
static void embed_rows(const float *ids, const float *table, int64_t V, int64_t C, int transposed, int64_t rows,
		       float *y)
{
	for (int64_t r = 0; r < rows; r++) {
		int64_t id = (int64_t)ids[r];
		for (int64_t c = 0; c < C; c++)
			y[r * C + c] = transposed ? table[c * V + id] : table[id * C + c];
	}
}

/* Instance iter of a lazy tensor: its values iter * size .. */
/* An int32 input's values: positions, each row's index among its
 * batch entry's tokens (x [B, T, 1]), from value first on. */
static void positions(const DataSpec *x, float *v, uint8_t *enc, int64_t first, int64_t n, int64_t at)
{
	int64_t T = x->rank >= 2 ? x->shape[x->rank - 2] : 1, C = x->shape[x->rank - 1];
	for (int64_t i = 0; i < n; i++)
		v[i] = (float)(at + ((first + i) / C) % T);
	run_quantize_encode(v, n, FMT_I32, 0, enc);
}

void run_instance_data(const DataSpec *x, const RunOpts *o, int64_t iter, float *v, uint8_t *enc)
{
	int64_t size = run_spec_values(x) / x->count;
	if (x->fmt == FMT_I32 && x->d.vocab) {
		token_ids(v, iter * size, size, o->seed, x->name, x->d.vocab);
		run_quantize_encode(v, size, FMT_I32, 0, enc);
	} else if (x->fmt == FMT_I32)
		positions(x, v, enc, iter * size, size, o->position);
	else
		normals(v, enc, iter * size, size, o->seed, x->name, x->d.mean, x->d.sd, x->fmt, x->scale, o->quantized);
}

/* ---- the machine's encoded instances, for the reference ---- */

typedef struct {
	DataSpec d;             /* name and shape: copies */
	uint64_t seed;
	uint8_t *enc;           /* every instance, encoded in d.fmt */
} CacheEnt;

struct RunCache {
	CacheEnt *e;
	int n, cap;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int filling;            /* run_cache_expect until run_program marks it filled */
};

RunCache *run_cache_new(void)
{
	RunCache *c = xcalloc(1, sizeof(RunCache));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	return c;
}

void run_cache_expect(RunCache *c)
{
	pthread_mutex_lock(&c->mu);
	c->filling = 1;
	pthread_mutex_unlock(&c->mu);
}

void run_cache_filled(RunCache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->filling = 0;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

void run_cache_free(RunCache *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	for (int i = 0; i < c->n; i++) {
		free((char *)c->e[i].d.name);
		free((int64_t *)c->e[i].d.shape);
		free(c->e[i].enc);
	}
	free(c->e);
	free(c);
}

/* Decoding gives quantize()'s bits: fp16 always, fp8 where the scale's
 * power of two is a normal float (run_decode_run's table). */
int run_cacheable(const DataSpec *x)
{
	return x->fmt != FMT_FP8 || (x->scale >= -126 && x->scale <= 126);
}

/* c takes enc (every instance of x, encoded). */
void run_cache_put(RunCache *c, const DataSpec *x, uint64_t seed, uint8_t *enc)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 16;
		c->e = xrealloc(c->e, (size_t)c->cap * sizeof *c->e);
	}
	CacheEnt *e = &c->e[c->n++];
	e->d = *x;
	e->d.name = xstrdup(x->name);
	int64_t *sh = xmalloc((size_t)(x->rank + 1) * sizeof *sh);
	memcpy(sh, x->shape, (size_t)x->rank * sizeof *sh);
	e->d.shape = sh;
	e->seed = seed;
	e->enc = enc;
}

static const uint8_t *cache_get(RunCache *c, const DataSpec *x, uint64_t seed)
{
	if (c) {                        /* entries are added only while filling */
		pthread_mutex_lock(&c->mu);
		while (c->filling)
			pthread_cond_wait(&c->cv, &c->mu);
		pthread_mutex_unlock(&c->mu);
	}
	for (int i = 0; c && i < c->n; i++)
		if (c->e[i].seed == seed && run_same_spec(&c->e[i].d, x) && c->e[i].d.scale == x->scale)
			return c->e[i].enc;
	return NULL;
}

int run_cache_holds(const RunCache *c, const uint8_t *enc)
{
	for (int i = 0; c && enc && i < c->n; i++)
		if (c->e[i].enc == enc)
			return 1;
	return 0;
}

void run_lazy_init(Lazy *z, int n)
{
	z->n = n;
	z->buf = xcalloc((size_t)n + 1, sizeof *z->buf);
	z->at = xmalloc(((size_t)n + 1) * sizeof *z->at);
	for (int i = 0; i < n; i++)
		z->at[i] = -1;
}

float *run_lazy_get(Lazy *z, int t, const DataSpec *x, const RunOpts *o, int64_t iter)
{
	if (z->at[t] != iter) {
		int64_t size = run_spec_values(x) / x->count;
		if (!z->buf[t])
			z->buf[t] = xmalloc((size_t)size * sizeof *z->buf[t]);
		const uint8_t *enc = run_cacheable(x) ? cache_get(o->cache, x, o->seed) : NULL;
		if (enc)
			run_decode_run(enc + iter * size * fmt_bytes(x->fmt), NULL, size, x->fmt, x->scale, z->buf[t]);
		else
			run_instance_data(x, o, iter, z->buf[t], NULL);
		z->at[t] = iter;
	}
	return z->buf[t];
}

void run_lazy_free(Lazy *z)
{
	for (int i = 0; i < z->n; i++)
		free(z->buf[i]);
	free(z->buf);
	free(z->at);
	memset(z, 0, sizeof *z);
}

/* Whether .npy a has x's shape: a parameter's [count, ...] (stacked),
 * or its own for one instance; an input's own, or with o->parts > 1 every
 * part's ([parts x batch, ...]). */
static int file_shape(const Npy *a, const DataSpec *x, const RunOpts *o)
{
	int64_t parts = !x->param && o->parts > 1 ? o->parts : 1;
	int stk = x->param && (x->count > 1 || (a->rank == x->rank + 1 && a->shape[0] == 1));
	if (a->rank != x->rank + stk || (stk && a->shape[0] != x->count))
		return 0;
	for (int k = 0; k < x->rank; k++)
		if (a->shape[k + stk] != x->shape[k] * (k == 0 ? parts : 1))
			return 0;
	return 1;
}

/* The shape refusal: file, tensor and, for an input split over a
 * prefill's runs, the program and the shape wanted. */
static int shape_err(const char *path, const DataSpec *x, const RunOpts *o, Err *e)
{
	if (x->param || o->parts < 2)
		return errf(e, "'%s': shape does not match tensor '%s' of the model%s", path, x->name,
			    x->count > 1 ? " (a stacked parameter: [count, ...])" : "");
	char want[160];
	int n = snprintf(want, sizeof want, "%" PRId64, x->shape[0] * o->parts);
	for (int k = 1; k < x->rank && n > 0 && (size_t)n < sizeof want; k++)
		n += snprintf(want + n, sizeof want - (size_t)n, ", %" PRId64, x->shape[k]);
	return errf(e, "'%s': shape does not match input '%s' of '%s': it runs once per part of the decode's "
		    "batch (%" PRId64 " parts), so its .npy holds every part's, [%s]", path, x->name,
		    o->prog ? o->prog : "<stdin>", o->parts, want);
}

/* v: x's n values from the .npy at path (with o->parts > 1, an input's
 * part o->part of them), quantized into x's format when o asks. */
static int file_data(const char *path, const DataSpec *x, const RunOpts *o, float *v, int64_t n, Err *e)
{
	Npy a;
	float *f;
	if (npy_read(path, &a, e))
		return -1;
	if (!file_shape(&a, x, o)) {
		npy_free(&a);
		return shape_err(path, x, o, e);
	}
	int64_t off = !x->param && o->parts > 1 ? o->part * n : 0;     /* this run's part */
	if (x->fmt == FMT_I32 && a.type != NPY_I32) {     /* ids and positions: never rounded from floats */
		npy_free(&a);
		return errf(e, "'%s': tensor '%s' is int32 (token ids or positions): its .npy must hold int32 "
			    "('<i4'), not floats", path, x->name);
	}
	for (int64_t i = off; x->fmt == FMT_I32 && i < off + n; i++) {
		int32_t k;
		memcpy(&k, (const char *)a.data + 4 * i, 4);
		if (k > RUN_EXACT_INT || k < -RUN_EXACT_INT) {
			npy_free(&a);
			return errf(e, "'%s': tensor '%s' holds %" PRId32 " at index %" PRId64 ": amp-run holds int32 "
				    "values as floats, exact up to %d", path, x->name, k, i, RUN_EXACT_INT);
		}
	}
	if (npy_floats(&a, &f, e)) {
		char why[sizeof e->msg];
		memcpy(why, e->msg, sizeof why);
		npy_free(&a);
		return errf(e, "'%s': %s (tensor '%s' needs floats)", path, why, x->name);
	}
	memcpy(v, f + off, (size_t)n * sizeof *f);
	free(f);
	npy_free(&a);
	/* bad data is the file's fault, not the machine's: said here, before
	 * a check would find the machine's result "over its tolerance" */
	for (int64_t i = 0; i < n; i++)
		if (!isfinite(v[i]))
			return errf(e, "'%s': tensor '%s' holds %s at index %" PRId64 ": data must be finite", path,
				    x->name, isnan(v[i]) ? "NaN" : v[i] > 0 ? "+inf" : "-inf", off + i);
	if (o->quantized) {
		quantize_n(v, n, x->fmt, x->scale);
		for (int64_t i = 0; i < n; i++)
			if (!isfinite(v[i]))
				return errf(e, "'%s': tensor '%s' holds a value past what %s holds at index %" PRId64,
					    path, x->name, fmt_name(x->fmt), off + i);
	}
	return 0;
}

/* v: x's values from DIR/<name>.npy when --data has it, else generated
 * from the seed; quantized into x's format when o asks. */
int run_tensor_data(const DataSpec *x, const RunOpts *o, float *v, Err *e)
{
	int64_t n = run_spec_values(x);
	if (o->data_dir && strchr(x->name, '/'))
		return errf(e, "--data: tensor '%s' holds '/': its file would not be in %s", x->name, o->data_dir);
	char *path = data_file(x, o);
	if (path) {
		int rc = file_data(path, x, o, v, n, e);
		free(path);
		return rc;
	}
	if (x->fmt == FMT_I32 && x->d.vocab)
		token_ids(v, 0, n, o->seed, x->name, x->d.vocab);
	else if (x->fmt == FMT_I32)
		positions(x, v, NULL, 0, n, o->position);
	else
		normals(v, NULL, 0, n, o->seed, x->name, x->d.mean, x->d.sd, x->fmt, x->scale, o->quantized);
	return 0;
}

DataSpec run_plan_spec(const Plan *pl, int t)
{
	const PTensor *x = &pl->t[t];
	return (DataSpec){ x->name, x->rank, x->shape, x->count, x->fmt, x->scale, plan_dist(pl, t),
			   x->role == R_PARAM };
}

/* Image [B, C, H, W] to patches [B, cls + (H/p)(W/p), C*p*p]: cls zero
 * rows, then patch (i, j) in row-major order, its features ordered
 * channel, row, column (a convolution weight's order). Values move
 * unchanged. */
void run_patchify(const float *x, int64_t B, int64_t C, int64_t H, int64_t W, int64_t p, int64_t cls,
		     float *y)
{
	int64_t gw = W / p, n = 0;
	for (int64_t b = 0; b < B; b++) {
		for (int64_t z = 0; z < cls * C * p * p; z++)
			y[n++] = 0;             /* the class token slots */
		for (int64_t pi = 0; pi < H / p; pi++)
			for (int64_t pj = 0; pj < gw; pj++)
				for (int64_t c = 0; c < C; c++)
					for (int64_t r = 0; r < p; r++)
						for (int64_t q = 0; q < p; q++)
							y[n++] = x[((b * C + c) * H + pi * p + r) * W + pj * p + q];
	}
}

int run_data_dir_ok(const RunOpts *o, Err *e)
{
	struct stat dir;
	if (o->data_dir && (stat(o->data_dir, &dir) != 0 || !S_ISDIR(dir.st_mode)))
		return errf(e, "cannot read data directory '%s'", o->data_dir);
	return 0;
}

RunOpts run_input_opts(const RunOpts *o)
{
	RunOpts c = *o;
	if (o->step > 0)        /* made from the seed and the step; read only by a prefill's part */
		c.seed = mix(o->seed + (uint64_t)o->step * 0x9E3779B97F4A7C15u), c.data_dir = o->parts > 1 ? o->data_dir : NULL;
	return c;
}

float *run_state_values(const RunOpts *o, const char *name, int64_t n, int ref)
{
	const float *c = carry_find(o->carry, name, n, ref);
	float *v = xcalloc((size_t)n, sizeof *v);
	if (c)
		memcpy(v, c, (size_t)n * sizeof *v);
	return v;
}

char *param_key(const PTensor *x)
{
	return xasprintf("%s %s %d", x->name, fmt_name(x->fmt), x->scale);
}

/* Every position an append step reads names a row of its state. */
static int append_rows(const Plan *pl, float *const *val, Err *e)
{
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind != STEP_COMPUTE || st->compute != C_APPEND)
			continue;
		int pt = pl->p[st->in[1]].tensor;
		const PTensor *x = &pl->t[pt], *c = &pl->t[pl->p[st->out].tensor];
		int64_t n = tensor_count(x), P = c->shape[1];
		for (int64_t i = 0; val[pt] && st->first >= 0 && i < n; i++)
			if (val[pt][i] != (float)(st->first + i % x->shape[1]))
				return errf(e, "positions '%s' hold %.0f at [%lld, %lld]: append '%s' writes its rows at "
					    "positions %lld on (first)", x->name, (double)val[pt][i], (long long)(i / x->shape[1]),
					    (long long)(i % x->shape[1]), st->op, (long long)st->first);
		for (int64_t i = 0; val[pt] && i < n; i++)
			if (!(val[pt][i] >= 0 && val[pt][i] < (float)P))
				return errf(e, "positions '%s' hold %.0f at [%lld, %lld]: state '%s' has positions 0 "
					    "to %lld (append '%s')", x->name, (double)val[pt][i], (long long)(i / x->shape[1]),
					    (long long)(i % x->shape[1]), c->name, (long long)(P - 1), st->op);
	}
	return 0;
}

int run_data(const Plan *pl, const RunOpts *o, float **val, Err *e)
{
	if (run_data_dir_ok(o, e))
		return -1;
	RunOpts oi = run_input_opts(o);
	for (int t = 0; t < pl->nt; t++) {
		const PTensor *x = &pl->t[t];
		val[t] = NULL;
		if (x->role == R_STATE)
			val[t] = run_state_values(o, x->name, tensor_values(x), 0);
		if (x->role != R_INPUT && x->role != R_PARAM)
			continue;
		int host = 0;
		for (int h = 0; h < pl->nh; h++)
			host |= pl->h[h].out == t;
		if (host)
			continue;               /* made from its host op's input below */
		DataSpec d = run_plan_spec(pl, t);
		if (run_lazy_spec(&d, o))
			continue;               /* made an instance at a time by its users */
		char *key = param_key(x);
		val[t] = x->role == R_PARAM ? carry_find(o->params, key, tensor_values(x), 0) : NULL;
		free(key);
		if (val[t])
			continue;               /* an earlier run's: parameters do not change */
		val[t] = xmalloc((size_t)tensor_values(x) * sizeof **val);
		const float *g = x->role == R_INPUT ? carry_find(o->given, x->name, tensor_values(x), 0) : NULL;
		if (g) {                        /* given by name (--generate's token ids) */
			memcpy(val[t], g, (size_t)tensor_values(x) * sizeof **val);
			continue;
		}
		if (run_tensor_data(&d, x->role == R_INPUT ? &oi : o, val[t], e))
			return -1;
	}
	for (int h = 0; h < pl->nh; h++) {
		const Host *ho = &pl->h[h];
		if (ho->kind == HOST_EMBED) {   /* rows of the table as the machine holds it, in fp16 */
			const PTensor *ids = &pl->t[ho->in], *tb = &pl->t[ho->table];
			int64_t V = tb->shape[ho->transposed ? 1 : 0], C = tb->shape[ho->transposed ? 0 : 1];
			int64_t n = tensor_count(ids);
			for (int64_t i = 0; i < n; i++)
				if (!(val[ho->in][i] >= 0 && val[ho->in][i] < (float)V))
					return errf(e, "ids '%s' hold %.0f at [%lld, %lld]: table '%s' has rows 0 to %lld "
						    "(embed '%s')", ids->name, (double)val[ho->in][i],
						    (long long)(i / ids->shape[1]), (long long)(i % ids->shape[1]), tb->name,
						    (long long)(V - 1), ho->op);
			float *y = val[ho->out] = xmalloc((size_t)(n * C) * sizeof **val);
			embed_rows(val[ho->in], val[ho->table], V, C, ho->transposed, n, y);
			quantize_n(y, n * C, FMT_FP16, 0);
			continue;
		}
		const PTensor *img = &pl->t[pl->h[h].in];
		run_patchify(val[pl->h[h].in], img->shape[0], img->shape[1], img->shape[2], img->shape[3],
			     pl->h[h].patch, pl->h[h].cls,
			     val[pl->h[h].out] = xmalloc((size_t)tensor_count(&pl->t[pl->h[h].out]) * sizeof **val));
	}
	return append_rows(pl, val, e);
}
