#include "stage/plan.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stage/alloc.h"
#include "stage/stage.h"

static const char *role_names[R_COUNT] = { "input", "param", "act", "output", "partial", "state" };
static const char *map_names[MAP_COUNT] = { "identity", "native-panel", "relayout" };
static const char *move_names[MOVE_COUNT] = { "parameter", "activation", "reduction",
					       "output", "copy", "relay" };
static const char *compute_names[C_COUNT] = { "cast", "pack", "matmul", "reduce", "gelu",
					      "add", "layernorm", "attention", "broadcast", "carry",
					      "merge", "rmsnorm", "silu", "mul", "rope", "append",
					      "last" };
static const char *operand_names[OPD_COUNT] = { "a", "b", "bias", "partial", "out", "x",
					        "scale", "q", "k", "v", "positions" };

static const char *stage_names[STAGE_COUNT] = { "amp-plan", "amp-expand", "amp-exchange",
						  "amp-group" };

const char *stage_format(StageKind k) { return stage_names[k]; }
const char *role_name(PRole r) { return role_names[r]; }
const char *mapping_name(Mapping m) { return map_names[m]; }
const char *movement_name(Movement m) { return move_names[m]; }
const char *compute_name(ComputeKind c) { return compute_names[c]; }
const char *operand_name(Operand o) { return operand_names[o]; }

static int lookup(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -1;
}

void plan_free(Plan *p)
{
	for (int i = 0; i < p->nt; i++)
		free(p->t[i].name);
	for (int i = 0; i < p->ng; i++)
		free(p->g[i].op);
	for (int i = 0; i < p->np; i++)
		free(p->p[i].name);
	for (int i = 0; i < p->ns; i++)
		free(p->s[i].op);
	for (int i = 0; i < p->nph; i++)
		free(p->ph[i].label);
	for (int i = 0; i < p->nh; i++)
		free(p->h[i].op);
	for (int i = 0; i < p->nr; i++)
		free(p->r[i].name);
	free(p->h);
	free(p->r);
	free(p->x);
	free(p->ph);
	free(p->t);
	free(p->g);
	free(p->p);
	free(p->s);
	free(p->model);
	for (int i = 0; i < p->nprov; i++)
		prov_free(&p->prov[i]);
	free(p->prov);
	memset(p, 0, sizeof *p);
}

void prov_free(Prov *pr)
{
	free(pr->tool);
	free(pr->version);
	free(pr->options);
	for (int i = 0; i < pr->nf; i++) {
		free(pr->f[i].role);
		free(pr->f[i].name);
	}
	memset(pr, 0, sizeof *pr);
}

static void prov_copy(Prov *d, const Prov *s)
{
	*d = *s;
	d->tool = xstrdup(s->tool);
	d->version = xstrdup(s->version);
	d->options = xstrdup(s->options);
	for (int i = 0; i < s->nf; i++) {
		d->f[i].role = xstrdup(s->f[i].role);
		d->f[i].name = xstrdup(s->f[i].name);
	}
}

void prov_hex(uint64_t fnv1a, char hex[17])
{
	snprintf(hex, 17, "%016" PRIx64, fnv1a);
}

void plan_add_prov(Plan *p, const Prov *pr)
{
	p->prov = xrealloc(p->prov, (size_t)(p->nprov + 1) * sizeof *p->prov);
	prov_copy(&p->prov[p->nprov++], pr);
}

static void *dup_array(const void *a, size_t n, size_t size)
{
	void *d = xmalloc(n ? n * size : 1);
	if (n)
		memcpy(d, a, n * size);
	return d;
}

void plan_dup(Plan *d, const Plan *p)
{
	*d = *p;
	d->model = xstrdup(p->model);
	d->prov = dup_array(p->prov, (size_t)p->nprov, sizeof *p->prov);
	for (int i = 0; i < p->nprov; i++)
		prov_copy(&d->prov[i], &p->prov[i]);
	d->t = dup_array(p->t, (size_t)p->nt, sizeof *p->t);
	d->g = dup_array(p->g, (size_t)p->ng, sizeof *p->g);
	d->p = dup_array(p->p, (size_t)p->np, sizeof *p->p);
	d->s = dup_array(p->s, (size_t)p->ns, sizeof *p->s);
	d->x = dup_array(p->x, (size_t)p->nx, sizeof *p->x);
	d->ph = dup_array(p->ph, (size_t)p->nph, sizeof *p->ph);
	d->h = dup_array(p->h, (size_t)p->nh, sizeof *p->h);
	d->r = dup_array(p->r, (size_t)p->nr, sizeof *p->r);
	for (int i = 0; i < p->nt; i++)
		d->t[i].name = xstrdup(p->t[i].name);
	for (int i = 0; i < p->ng; i++)
		d->g[i].op = xstrdup(p->g[i].op);
	for (int i = 0; i < p->np; i++)
		d->p[i].name = xstrdup(p->p[i].name);
	for (int i = 0; i < p->ns; i++)
		d->s[i].op = xstrdup(p->s[i].op);
	for (int i = 0; i < p->nph; i++)
		d->ph[i].label = xstrdup(p->ph[i].label);
	for (int i = 0; i < p->nh; i++)
		d->h[i].op = xstrdup(p->h[i].op);
	for (int i = 0; i < p->nr; i++)
		d->r[i].name = xstrdup(p->r[i].name);
	/* plan_add_xfer grows x in powers of two */
	if (p->nx) {
		size_t cap = 1;
		while (cap < (size_t)p->nx)
			cap *= 2;
		d->x = xrealloc(d->x, cap * sizeof *d->x);
	}
}

Mapping copy_mapping(const Placement *src, const Placement *dst)
{
	if (src->layout != dst->layout)
		return MAP_RELAYOUT;
	if (layout_is_panel(src->layout) && place_panel_aligned(src) && place_panel_aligned(dst))
		return MAP_NATIVE_PANEL;
	return MAP_IDENTITY;
}

int plan_repeat_of(const Plan *p, int step)
{
	for (int i = 0; i < p->nr; i++)
		if (step >= p->r[i].first && step <= p->r[i].last)
			return i;
	return -1;
}

int64_t plan_step_count(const Plan *p, int step)
{
	int r = plan_repeat_of(p, step);
	return r < 0 ? 1 : p->r[r].count;
}

int plan_stacked(const Plan *p, int i)
{
	return p->t[p->p[i].tensor].count > 1 && (plan_writer(p, i) < 0 || plan_state_home(p, i));
}

int64_t plan_chunks(const Step *s)
{
	return s->chunks > 1 ? s->chunks : 1;
}

int64_t plan_head_dim(const Plan *p, const Step *s)
{
	const PTensor *o = &p->t[p->p[s->out].tensor];
	int64_t w = o->shape[o->rank - 1] / s->heads;
	return o->role == R_PARTIAL ? w - 2 * plan_chunks(s) : w;
}

int64_t place_instance(const Placement *p)
{
	return cdiv(place_max_bytes(p), ALLOC_ALIGN) * ALLOC_ALIGN;  /* as alloc sizes a placement */
}

/* ---- writing ---- */

static void write_placement(YWriter *w, const Plan *pl, const Placement *p)
{
	yw_map(w, 1);
	yw_kstr(w, "name", p->name);
	yw_kstr(w, "tensor", pl->t[p->tensor].name);
	yw_kstr(w, "layout", layout_name(p->layout));
	yw_kints(w, "split", p->rank, p->split);
	yw_kints(w, "block", p->rank, p->block);
	yw_kint(w, "base", p->base);
	yw_kints(w, "stride", p->rank, p->stride);
	yw_kints(w, "rep", p->nrep, p->rep);
	yw_kints(w, "rstride", p->nrep, p->rstride);
	if (place_windowed(p)) {
		yw_kints(w, "offset", p->rank, p->off);
		yw_kints(w, "extent", p->rank, p->shape);
	}
	if (pl->stage >= STAGE_EXPAND)
		yw_kint(w, "addr", p->addr);
	yw_end_map(w);
}

void plan_add_xfer(Plan *pl, const Xfer *x)
{
	if ((pl->nx & (pl->nx - 1)) == 0)
		pl->x = xrealloc(pl->x, (size_t)(pl->nx ? 2 * pl->nx : 1) * sizeof *pl->x);
	pl->x[pl->nx++] = *x;
}

static void write_step(YWriter *w, const Plan *pl, int i)
{
	const Step *s = &pl->s[i];

	yw_map(w, 1);
	yw_kint(w, "step", i);
	if (s->kind == STEP_COPY) {
		yw_kstr(w, "copy", movement_name(s->move));
		yw_kstr(w, "op", s->op);
		yw_kstr(w, "operand", operand_name(s->operand));
		yw_kstr(w, "map", mapping_name(s->map));
		yw_kstr(w, "src", pl->p[s->src].name);
		yw_kstr(w, "dst", pl->p[s->dst].name);
	} else {
		yw_kstr(w, "compute", compute_name(s->compute));
		yw_kstr(w, "op", s->op);
		yw_str(w, "in");
		yw_seq(w, 1);
		for (int k = 0; k < s->nin; k++)
			yw_str(w, pl->p[s->in[k]].name);
		yw_end_seq(w);
		yw_kstr(w, "out", pl->p[s->out].name);
		if (s->compute == C_LAYERNORM || s->compute == C_RMSNORM) {
			yw_str(w, "eps");
			yw_f64(w, s->eps);
		}
		if (s->compute == C_APPEND && s->first >= 0)
			yw_kint(w, "first", s->first);
		if (s->compute == C_ROPE) {
			yw_kint(w, "heads", s->heads);
			yw_kint(w, "head_dim", s->head_dim);
			yw_str(w, "theta");
			yw_f64(w, s->theta);
		}
		if (s->compute == C_ATTENTION) {
			yw_kint(w, "heads", s->heads);
			if (s->kv_heads != s->heads)
				yw_kint(w, "kv_heads", s->kv_heads);
			if (s->causal)
				yw_kbool(w, "causal", 1);
			yw_str(w, "scale");
			yw_f64(w, s->scale);
			yw_kint(w, "scratch", s->scratch);
			if (s->chunks > 1)
				yw_kint(w, "chunks", s->chunks);
		}
	}
	yw_end_map(w);
}

int plan_write(const Plan *pl, Output *out, Err *e)
{
	YWriter w;

	if (yw_open(&w, out, e))
		return -1;
	stage_write_header(&w, stage_format(pl->stage), PLAN_VERSION, &pl->machine, pl->model);

	yw_str(&w, "provenance");
	yw_seq(&w, 0);
	for (int i = 0; i < pl->nprov; i++) {
		const Prov *pr = &pl->prov[i];
		yw_map(&w, 1);
		yw_kstr(&w, "tool", pr->tool);
		yw_kstr(&w, "version", pr->version);
		yw_kstr(&w, "options", pr->options);
		yw_str(&w, "files");
		yw_seq(&w, 1);
		for (int k = 0; k < pr->nf; k++) {
			char hex[17];
			prov_hex(pr->f[k].fnv1a, hex);
			yw_map(&w, 1);
			yw_kstr(&w, "role", pr->f[k].role);
			yw_kstr(&w, "name", pr->f[k].name);
			yw_kstr(&w, "fnv1a", hex);
			yw_end_map(&w);
		}
		yw_end_seq(&w);
		yw_end_map(&w);
	}
	yw_end_seq(&w);

	yw_str(&w, "tensors");
	yw_seq(&w, 0);
	for (int i = 0; i < pl->nt; i++) {
		const PTensor *t = &pl->t[i];
		yw_map(&w, 1);
		yw_kstr(&w, "name", t->name);
		yw_kstr(&w, "role", role_name(t->role));
		yw_kints(&w, "shape", t->rank, t->shape);
		yw_kstr(&w, "dtype", fmt_name(t->fmt));
		if (t->fmt == FMT_FP8)
			yw_kint(&w, "scale", t->scale);
		if (t->count > 1)
			yw_kint(&w, "count", t->count);
		yw_end_map(&w);
	}
	yw_end_seq(&w);

	yw_str(&w, "host");
	yw_seq(&w, 0);
	for (int i = 0; i < pl->nh; i++) {
		const Host *h = &pl->h[i];
		yw_map(&w, 1);
		yw_kstr(&w, "op", h->op);
		yw_kstr(&w, "host", h->kind == HOST_EMBED ? "embed" : "patchify");
		yw_kstr(&w, "x", pl->t[h->in].name);
		if (h->kind == HOST_EMBED) {
			yw_kstr(&w, "table", pl->t[h->table].name);
			if (h->transposed)
				yw_kbool(&w, "transposed", 1);
		} else {
			yw_kint(&w, "patch", h->patch);
			yw_kint(&w, "class_tokens", h->cls);
		}
		yw_kstr(&w, "out", pl->t[h->out].name);
		yw_end_map(&w);
	}
	yw_end_seq(&w);

	yw_str(&w, "gemms");
	yw_seq(&w, 0);
	for (int i = 0; i < pl->ng; i++) {
		const Gemm *g = &pl->g[i];
		yw_map(&w, 1);
		yw_kstr(&w, "op", g->op);
		yw_kstr(&w, "a", pl->t[g->a].name);
		yw_kstr(&w, "b", pl->t[g->b].name);
		if (g->bias >= 0)
			yw_kstr(&w, "bias", pl->t[g->bias].name);
		yw_kstr(&w, "out", pl->t[g->out].name);
		yw_kint(&w, "m", g->m);
		yw_kint(&w, "k", g->k);
		yw_kint(&w, "n", g->n);
		yw_kstr(&w, "format", fmt_name(g->fmt));
		yw_kints(&w, "grid", 3, g->grid);
		yw_kstr(&w, "cast", cast_name(g->cast));
		yw_kstr(&w, "staging", staging_name(g->staging));
		yw_kstr(&w, "out_staging", g->unpack ? "unpack" : "direct");
		yw_kstr(&w, "reduce", g->scatter ? "scatter" : "gather");
		yw_kstr(&w, "a_layout", layout_name(LAYOUT_AMP_LEFT));
		yw_kstr(&w, "b_layout", layout_name(LAYOUT_TRANSPOSED_RIGHT));
		yw_kstr(&w, "out_layout", layout_name(LAYOUT_AMP_OUTPUT));
		yw_kbool(&w, "pinned", g->pinned);
		yw_kint(&w, "tiles", g->tiles);
		yw_kint(&w, "peak_bytes", g->peak_bytes);
		yw_end_map(&w);
	}
	yw_end_seq(&w);

	yw_str(&w, "placements");
	yw_seq(&w, 0);
	for (int i = 0; i < pl->np; i++)
		write_placement(&w, pl, &pl->p[i]);
	yw_end_seq(&w);

	yw_str(&w, "steps");
	yw_seq(&w, 0);
	for (int i = 0; i < pl->ns; i++)
		write_step(&w, pl, i);
	yw_end_seq(&w);

	yw_str(&w, "repeats");
	yw_seq(&w, 0);
	for (int i = 0; i < pl->nr; i++) {
		int64_t r[2] = { pl->r[i].first, pl->r[i].last };
		yw_map(&w, 1);
		yw_kstr(&w, "repeat", pl->r[i].name);
		yw_kints(&w, "steps", 2, r);
		yw_kint(&w, "count", pl->r[i].count);
		yw_end_map(&w);
	}
	yw_end_seq(&w);

	if (pl->stage >= STAGE_EXCHANGE) {
		yw_str(&w, "phases");
		yw_seq(&w, 0);
		for (int i = 0; i < pl->nph; i++) {
			int64_t r[2] = { pl->ph[i].first, pl->ph[i].last };
			yw_map(&w, 1);
			yw_kint(&w, "phase", i);
			yw_kints(&w, "steps", 2, r);
			yw_kstr(&w, "label", pl->ph[i].label);
			yw_end_map(&w);
		}
		yw_end_seq(&w);
	}
	if (pl->stage >= STAGE_EXPAND) {
		yw_str(&w, "transfers");
		yw_seq(&w, 0);
		for (int i = 0; i < pl->nx; i++)
			xfer_write(&w, &pl->x[i]);
		yw_end_seq(&w);
	}

	yw_end_map(&w);
	return yw_close(&w, e);
}

/* ---- reading ---- */

int plan_find_tensor(const Plan *pl, const char *s)
{
	for (int i = 0; i < pl->nt; i++)
		if (strcmp(pl->t[i].name, s) == 0)
			return i;
	return -1;
}

static int find_placement(const Plan *pl, const char *s)
{
	for (int i = 0; i < pl->np; i++)
		if (strcmp(pl->p[i].name, s) == 0)
			return i;
	return -1;
}

static int ref_tensor(const Plan *pl, const char *f, const Val *r, const char *key, int *out, Err *e)
{
	const char *s;
	if (get_str(f, r, key, &s, e))
		return -1;
	if ((*out = plan_find_tensor(pl, s)) < 0)
		return val_err(f, map_get(r, key), e, "unknown tensor '%s'", s);
	return 0;
}

static int ref_placement(const Plan *pl, const char *f, const Val *v, int *out, Err *e)
{
	const char *s;
	if (val_str(f, v, &s, e))
		return -1;
	if ((*out = find_placement(pl, s)) < 0)
		return val_err(f, v, e, "unknown placement '%s'", s);
	return 0;
}

static int ref_enum(const char *f, const Val *r, const char *key, const char *const *names,
		    int n, int *out, Err *e)
{
	const char *s;
	if (get_str(f, r, key, &s, e))
		return -1;
	if ((*out = lookup(names, n, s)) < 0)
		return val_err(f, map_get(r, key), e, "unknown %s '%s'", key, s);
	return 0;
}

static int unique(const char *f, const Val *r, const char *name, int exists, Err *e)
{
	if (exists)
		return val_err(f, map_get(r, "name"), e, "'%s' is defined twice", name);
	return 0;
}

/* The version of the stage file being read (the two ownerships' builds
 * read on two threads). */
static _Thread_local int reading_version;

static int read_tensor(Plan *pl, const char *f, const Val *r, Err *e)
{
	static const char *keys[] = { "name", "role", "shape", "dtype", "scale", "count", NULL };
	PTensor t;
	const char *name;
	int role, fmt;
	int64_t scale = 0;

	memset(&t, 0, sizeof t);
	if (map_keys(f, r, keys, e) || get_str(f, r, "name", &name, e) ||
	    unique(f, r, name, plan_find_tensor(pl, name) >= 0, e) ||
	    ref_enum(f, r, "role", role_names, R_COUNT, &role, e) ||
	    ref_enum(f, r, "dtype", (const char *const[]){ "fp32", "fp16", "fp8", "int32" }, 4, &fmt, e))
		return -1;
	const Val *sv;
	if (map_need(f, r, "shape", &sv, e) ||
	    val_ints(f, sv, MAX_RANK, 1, INT64_C(1) << 40, t.shape, &t.rank, e))
		return -1;
	if (t.rank == 0)
		return val_err(f, sv, e, "a tensor needs at least one axis");
	if (role == R_STATE && reading_version < 8)
		return val_err(f, map_get(r, "role"), e, "role state needs version 8 (this file is version %d)",
			       reading_version);
	if (fmt == FMT_I32 && reading_version < 7)
		return val_err(f, map_get(r, "dtype"), e, "dtype int32 needs version 7 (this file is version %d)",
			       reading_version);
	if (map_get(r, "scale") && (fmt != FMT_FP8 || val_int(f, map_get(r, "scale"), -126, 126, &scale, e)))
		return fmt != FMT_FP8 ? val_err(f, map_get(r, "scale"), e, "only fp8 tensors carry a scale") : -1;
	t.count = 1;
	if (map_get(r, "count")) {
		if (get_int(f, r, "count", 2, 1 << 20, &t.count, e))
			return -1;
		if (role != R_PARAM && role != R_STATE)
			return val_err(f, map_get(r, "count"), e, "only parameters and states are stacked");
	}
	t.name = xstrdup(name);
	t.role = (PRole)role;
	t.fmt = (Format)fmt;
	t.scale = (int)scale;
	pl->t = xrealloc(pl->t, (size_t)(pl->nt + 1) * sizeof *pl->t);
	pl->t[pl->nt++] = t;
	return 0;
}

static int read_gemm(Plan *pl, const char *f, const Val *r, Err *e)
{
	static const char *keys[] = { "op", "a", "b", "bias", "out", "m", "k", "n", "format",
				      "grid", "cast", "staging", "out_staging", "reduce", "a_layout", "b_layout",
				      "out_layout", "pinned", "tiles", "peak_bytes", NULL };
	static const char *const bools[] = { "false", "true" };
	static const char *const fmts[] = { "fp32", "fp16", "fp8" };
	static const char *const casts[] = { "auto", "early", "late" };
	static const char *const stagings[] = { "auto", "pack-once", "direct", "spread" };
	Gemm g;
	const char *op, *s;
	int fmt, cast, staging, pinned, n, unpack, scatter;
	const Val *v;

	memset(&g, 0, sizeof g);
	g.bias = -1;
	if (map_keys(f, r, keys, e) || get_str(f, r, "op", &op, e) ||
	    ref_tensor(pl, f, r, "a", &g.a, e) || ref_tensor(pl, f, r, "b", &g.b, e) ||
	    (map_get(r, "bias") && ref_tensor(pl, f, r, "bias", &g.bias, e)) ||
	    ref_tensor(pl, f, r, "out", &g.out, e) ||
	    get_int(f, r, "m", 1, INT64_C(1) << 40, &g.m, e) ||
	    get_int(f, r, "k", 1, INT64_C(1) << 40, &g.k, e) ||
	    get_int(f, r, "n", 1, INT64_C(1) << 40, &g.n, e) ||
	    ref_enum(f, r, "format", fmts, 3, &fmt, e) ||
	    map_need(f, r, "grid", &v, e) ||
	    val_ints(f, v, 3, 1, INT64_C(1) << 30, g.grid, &n, e) ||
	    ref_enum(f, r, "cast", casts, 3, &cast, e) ||
	    ref_enum(f, r, "staging", stagings, 4, &staging, e) ||
	    ref_enum(f, r, "out_staging", (const char *const[]){ "direct", "unpack" }, 2, &unpack, e) ||
	    ref_enum(f, r, "reduce", (const char *const[]){ "gather", "scatter" }, 2, &scatter, e) ||
	    ref_enum(f, r, "pinned", bools, 2, &pinned, e) ||
	    get_int(f, r, "tiles", 1, INT64_C(1) << 40, &g.tiles, e) ||
	    get_int(f, r, "peak_bytes", 0, INT64_C(1) << 50, &g.peak_bytes, e))
		return -1;
	if (n != 3)
		return val_err(f, v, e, "grid must be [rows, k, cols]");
	if (g.grid[0] * g.grid[1] * g.grid[2] != g.tiles)
		return val_err(f, map_get(r, "tiles"), e, "tiles must be the product of the grid");
	if (staging == STAGING_SPREAD && reading_version < 6)
		return val_err(f, map_get(r, "staging"), e, "staging 'spread' needs version 6 (this file is version %d)",
			       reading_version);
	if (scatter && g.grid[1] == 1)
		return val_err(f, map_get(r, "reduce"), e, "reduce scatter needs grid k > 1 (grid k is 1)");
	static const struct { const char *key; LayoutKind want; } lay[] = {
		{ "a_layout", LAYOUT_AMP_LEFT }, { "b_layout", LAYOUT_TRANSPOSED_RIGHT },
		{ "out_layout", LAYOUT_AMP_OUTPUT },
	};
	for (int i = 0; i < 3; i++) {
		if (get_str(f, r, lay[i].key, &s, e))
			return -1;
		if (strcmp(s, layout_name(lay[i].want)))
			return val_err(f, map_get(r, lay[i].key), e, "%s must be %s (found '%s')",
				       lay[i].key, layout_name(lay[i].want), s);
	}
	g.op = xstrdup(op);
	g.fmt = (Format)fmt;
	g.cast = (CastOrder)cast;
	g.staging = (Staging)staging;
	g.unpack = unpack;
	g.scatter = scatter;
	g.pinned = pinned;
	pl->g = xrealloc(pl->g, (size_t)(pl->ng + 1) * sizeof *pl->g);
	pl->g[pl->ng++] = g;
	return 0;
}

static int read_placement(Plan *pl, const char *f, const Val *r, Err *e)
{
	static const char *keys[] = { "name", "tensor", "layout", "split", "block", "base",
				      "stride", "rep", "rstride", "offset", "extent", "addr", NULL };
	static const char *const lays[] = { "row-major", "amp-left", "transposed-right", "amp-output" };
	Placement p;
	const char *name;
	const Val *v;
	int lay, n;
	const int64_t big = INT64_C(1) << 40;

	memset(&p, 0, sizeof p);
	if (map_keys(f, r, keys, e) || get_str(f, r, "name", &name, e) ||
	    unique(f, r, name, find_placement(pl, name) >= 0, e) ||
	    ref_tensor(pl, f, r, "tensor", &p.tensor, e) ||
	    ref_enum(f, r, "layout", lays, 4, &lay, e) ||
	    get_int(f, r, "base", 0, big, &p.base, e))
		return -1;
	const PTensor *t = &pl->t[p.tensor];
	p.rank = t->rank;
	p.fmt = t->fmt;
	p.layout = (LayoutKind)lay;
	memcpy(p.shape, t->shape, sizeof p.shape);
	if (map_get(r, "offset") || map_get(r, "extent")) {
		const Val *ov, *ev;
		int no, ne;
		memcpy(p.whole, t->shape, sizeof p.whole);
		if (map_need(f, r, "offset", &ov, e) || val_ints(f, ov, MAX_RANK, 0, big, p.off, &no, e) ||
		    map_need(f, r, "extent", &ev, e) || val_ints(f, ev, MAX_RANK, 1, big, p.shape, &ne, e))
			return -1;
		if (no != p.rank || ne != p.rank)
			return val_err(f, ov, e, "offset and extent need one entry per axis of '%s'", t->name);
	}
	static const char *axes[] = { "split", "block", "stride" };
	int64_t *dst[] = { p.split, p.block, p.stride };
	for (int i = 0; i < 3; i++) {
		if (map_need(f, r, axes[i], &v, e) ||
		    val_ints(f, v, MAX_RANK, i < 2 ? 1 : 0, big, dst[i], &n, e))
			return -1;
		if (n != p.rank)
			return val_err(f, v, e, "%s has %d entries; tensor '%s' has rank %d",
				       axes[i], n, t->name, p.rank);
	}
	if (map_need(f, r, "rep", &v, e) || val_ints(f, v, MAX_REP, 1, big, p.rep, &p.nrep, e) ||
	    map_need(f, r, "rstride", &v, e) || val_ints(f, v, MAX_REP, 0, big, p.rstride, &n, e))
		return -1;
	if (n != p.nrep)
		return val_err(f, v, e, "rstride needs one entry per rep");
	if (pl->stage >= STAGE_EXPAND) {
		if (get_int(f, r, "addr", 0, pl->machine.sram_bytes, &p.addr, e))
			return -1;
		if (p.addr + place_max_bytes(&p) > pl->machine.sram_bytes)
			return val_err(f, map_get(r, "addr"), e, "placement '%s' at %lld (%lld bytes) "
				       "ends beyond SRAM (%lld bytes)", name, (long long)p.addr,
				       (long long)place_max_bytes(&p), (long long)pl->machine.sram_bytes);
	} else if (map_get(r, "addr")) {
		return val_err(f, map_get(r, "addr"), e, "a plan has no addresses (they come with amp-expand)");
	}
	p.name = (char *)name;
	if (place_check(&p, pl->machine.tiles, e))
		return val_err(f, r, e, "%s", e->msg);
	p.name = xstrdup(name);
	pl->p = xrealloc(pl->p, (size_t)(pl->np + 1) * sizeof *pl->p);
	pl->p[pl->np++] = p;
	return 0;
}

static int read_step(Plan *pl, const char *f, const Val *r, Err *e)
{
	static const char *copy_keys[] = { "step", "copy", "op", "operand", "map", "src", "dst", NULL };
	static const char *comp_keys[] = { "step", "compute", "op", "in", "out", "eps", "heads", "kv_heads",
					   "causal", "scale", "scratch", "head_dim", "theta", "first", "chunks", NULL };
	Step s;
	const char *op;
	int64_t idx;
	int k;
	const Val *v;

	memset(&s, 0, sizeof s);
	if (get_int(f, r, "step", 0, INT64_C(1) << 40, &idx, e))
		return -1;
	if (idx != pl->ns)
		return val_err(f, map_get(r, "step"), e, "expected step %d, found %lld",
			       pl->ns, (long long)idx);
	if (map_get(r, "copy")) {
		s.kind = STEP_COPY;
		if (map_keys(f, r, copy_keys, e) ||
		    ref_enum(f, r, "copy", move_names, MOVE_COUNT, &k, e))
			return -1;
		s.move = (Movement)k;
		if (ref_enum(f, r, "operand", operand_names, OPD_COUNT, &k, e))
			return -1;
		s.operand = (Operand)k;
		if (s.operand == OPD_POS && reading_version < 8)
			return val_err(f, map_get(r, "operand"), e, "operand 'positions' needs version 8 (this file "
				       "is version %d)", reading_version);
		if (ref_enum(f, r, "map", map_names, MAP_COUNT, &k, e))
			return -1;
		s.map = (Mapping)k;
		if (map_need(f, r, "src", &v, e) || ref_placement(pl, f, v, &s.src, e) ||
		    map_need(f, r, "dst", &v, e) || ref_placement(pl, f, v, &s.dst, e))
			return -1;
	} else if (map_get(r, "compute")) {
		s.kind = STEP_COMPUTE;
		if (map_keys(f, r, comp_keys, e) ||
		    ref_enum(f, r, "compute", compute_names, C_COUNT, &k, e))
			return -1;
		s.compute = (ComputeKind)k;
		if (s.compute >= C_RMSNORM && reading_version < 7)
			return val_err(f, map_get(r, "compute"), e, "compute '%s' needs version 7 (this file is version %d)",
				       compute_names[k], reading_version);
		if (s.compute >= C_APPEND && reading_version < 8)
			return val_err(f, map_get(r, "compute"), e, "compute '%s' needs version 8 (this file is "
				       "version %d)", compute_names[k], reading_version);
		if (map_need(f, r, "in", &v, e))
			return -1;
		if (v->kind != VAL_SEQ || v->n < 1 || v->n > 4)
			return val_err(f, v, e, "expected a list of 1 to 4 placements");
		if (v->n == 4 && (s.compute != C_ATTENTION || reading_version < 8))
			return val_err(f, v, e, "only attention reads 4 placements (its positions; version 8)");
		for (int i = 0; i < v->n; i++)
			if (ref_placement(pl, f, &v->items[i], &s.in[i], e))
				return -1;
		s.nin = v->n;
		if (map_need(f, r, "out", &v, e) || ref_placement(pl, f, v, &s.out, e))
			return -1;
		int norm = s.compute == C_LAYERNORM || s.compute == C_RMSNORM;
		if (norm && (map_need(f, r, "eps", &v, e) || val_f64(f, v, &s.eps, e)))
			return -1;
		if (!norm && map_get(r, "eps"))
			return val_err(f, map_get(r, "eps"), e, "only layernorm and rmsnorm take eps");
		if (s.compute == C_ATTENTION &&
		    (get_int(f, r, "heads", 1, 1 << 20, &s.heads, e) ||
		     map_need(f, r, "scale", &v, e) || val_f64(f, v, &s.scale, e) ||
		     get_int(f, r, "scratch", 0, pl->machine.sram_bytes, &s.scratch, e)))
			return -1;
		if (s.compute == C_ROPE &&
		    (get_int(f, r, "heads", 1, 1 << 20, &s.heads, e) || get_int(f, r, "head_dim", 2, 1 << 20, &s.head_dim, e) ||
		     map_need(f, r, "theta", &v, e) || val_f64(f, v, &s.theta, e)))
			return -1;
		if (s.compute == C_ROPE && (s.head_dim % 2 || !(s.theta > 1) || !isfinite(s.theta)))
			return val_err(f, r, e, "rope needs an even head_dim and a theta above 1");
		if (s.compute != C_ROPE && (map_get(r, "head_dim") || map_get(r, "theta")))
			return val_err(f, map_get(r, map_get(r, "head_dim") ? "head_dim" : "theta"), e,
				       "only rope takes head_dim and theta");
		if (s.compute != C_ATTENTION && (map_get(r, "scale") || (s.compute != C_ROPE && map_get(r, "heads")) ||
						 map_get(r, "scratch") || map_get(r, "kv_heads") || map_get(r, "causal")))
			return val_err(f, map_get(r, map_get(r, "scale") ? "scale" : map_get(r, "heads") ? "heads" :
						  map_get(r, "scratch") ? "scratch" : map_get(r, "kv_heads") ? "kv_heads" :
						  "causal"), e, "only attention takes heads, kv_heads, causal, scale and scratch");
		s.kv_heads = s.heads;
		if ((map_get(r, "kv_heads") || map_get(r, "causal")) && reading_version < 7)
			return val_err(f, map_get(r, map_get(r, "kv_heads") ? "kv_heads" : "causal"), e,
				       "%s needs version 7 (this file is version %d)",
				       map_get(r, "kv_heads") ? "kv_heads" : "causal", reading_version);
		if (map_get(r, "kv_heads") && get_int(f, r, "kv_heads", 1, s.heads, &s.kv_heads, e))
			return -1;
		if (s.compute == C_ATTENTION && s.heads % s.kv_heads)
			return val_err(f, map_get(r, "kv_heads"), e, "kv_heads %lld do not divide heads %lld",
				       (long long)s.kv_heads, (long long)s.heads);
		if (map_get(r, "causal") && val_bool(f, map_get(r, "causal"), &s.causal, e))
			return -1;
		if (s.compute == C_ATTENTION && s.nin < 3)
			return val_err(f, r, e, "attention reads q, k, v and optionally positions");
		if (s.compute == C_ATTENTION && s.nin == 4 && !s.causal)
			return val_err(f, r, e, "attention that reads positions is causal");
		if (s.compute == C_APPEND && s.nin != 2)
			return val_err(f, r, e, "append reads its rows and their positions");
		s.chunks = 1;
		if (map_get(r, "chunks") && s.compute != C_ATTENTION)
			return val_err(f, map_get(r, "chunks"), e, "only attention takes chunks");
		if (map_get(r, "chunks") && reading_version < 9)
			return val_err(f, map_get(r, "chunks"), e, "chunks needs version 9 (this file is version %d)",
				       reading_version);
		if (map_get(r, "chunks") && get_int(f, r, "chunks", 1, 1 << 20, &s.chunks, e))
			return -1;
		s.first = -1;
		if (map_get(r, "first") && (s.compute != C_APPEND ||
					    get_int(f, r, "first", 0, INT64_C(1) << 30, &s.first, e)))
			return s.compute != C_APPEND ? val_err(f, map_get(r, "first"), e, "only append takes first") : -1;
	} else {
		return val_err(f, r, e, "a step needs 'copy' or 'compute'");
	}
	if (get_str(f, r, "op", &op, e))
		return -1;
	s.op = xstrdup(op);
	pl->s = xrealloc(pl->s, (size_t)(pl->ns + 1) * sizeof *pl->s);
	pl->s[pl->ns++] = s;
	if (plan_check_step(pl, pl->ns - 1, e))
		return val_err(f, r, e, "%s", e->msg);
	return 0;
}

static int read_phase(Plan *pl, const char *f, const Val *r, Err *e)
{
	static const char *keys[] = { "phase", "steps", "label", NULL };
	int64_t id, st[2];
	int n;
	const char *label;
	const Val *v;

	if (map_keys(f, r, keys, e) || get_int(f, r, "phase", 0, INT64_C(1) << 30, &id, e))
		return -1;
	if (id != pl->nph)
		return val_err(f, map_get(r, "phase"), e, "expected phase %d, found %lld",
			       pl->nph, (long long)id);
	if (map_need(f, r, "steps", &v, e) || val_ints(f, v, 2, 0, pl->ns - 1, st, &n, e))
		return -1;
	if (n != 2 || st[0] > st[1] || (pl->nph && st[0] <= pl->ph[pl->nph - 1].last))
		return val_err(f, v, e, "steps must be [first, last], after the previous phase");
	if (get_str(f, r, "label", &label, e))
		return -1;
	for (int64_t k = st[0]; k <= st[1]; k++)
		if (pl->s[k].kind != STEP_COPY)
			return val_err(f, v, e, "phase %lld holds step %lld, a compute step; a phase holds "
				       "copies only", (long long)id, (long long)k);
	pl->ph = xrealloc(pl->ph, (size_t)(pl->nph + 1) * sizeof *pl->ph);
	pl->ph[pl->nph].first = (int)st[0];
	pl->ph[pl->nph].last = (int)st[1];
	pl->ph[pl->nph].label = xstrdup(label);
	pl->nph++;
	return 0;
}

/* An embed host record: ids [B, T, 1] int32, a rank 2 table, out [B, T, C] fp16. */
static int read_embed(Plan *pl, const char *f, const Val *r, const char *op, Host *h, Err *e)
{
	static const char *keys[] = { "op", "host", "x", "table", "transposed", "out", NULL };
	if (reading_version < 8)
		return val_err(f, map_get(r, "host"), e, "host 'embed' needs version 8 (this file is version %d)",
			       reading_version);
	if (map_keys(f, r, keys, e) || ref_tensor(pl, f, r, "x", &h->in, e) ||
	    ref_tensor(pl, f, r, "table", &h->table, e) || ref_tensor(pl, f, r, "out", &h->out, e))
		return -1;
	if (map_get(r, "transposed") && val_bool(f, map_get(r, "transposed"), &h->transposed, e))
		return -1;
	const PTensor *x = &pl->t[h->in], *t = &pl->t[h->table], *y = &pl->t[h->out];
	if (x->rank != 3 || x->fmt != FMT_I32 || x->shape[2] != 1 || t->rank != 2 || t->role != R_PARAM ||
	    y->rank != 3 || y->fmt != FMT_FP16 || y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1] ||
	    y->shape[2] != t->shape[h->transposed ? 0 : 1])
		return val_err(f, r, e, "embed '%s': '%s' is not the rows of '%s' that int32 ids '%s' name", op,
			       y->name, t->name, x->name);
	return 0;
}

static int read_host(Plan *pl, const char *f, const Val *r, Err *e)
{
	static const char *keys[] = { "op", "host", "x", "patch", "class_tokens", "out", NULL };
	static const char *const kinds[] = { "patchify", "embed" };
	Host h;
	const char *op;
	int k;

	memset(&h, 0, sizeof h);
	if (get_str(f, r, "op", &op, e) || ref_enum(f, r, "host", kinds, 2, &k, e))
		return -1;
	h.kind = (HostKind)k;
	if (h.kind == HOST_EMBED) {
		if (read_embed(pl, f, r, op, &h, e))
			return -1;
		h.op = xstrdup(op);
		pl->h = xrealloc(pl->h, (size_t)(pl->nh + 1) * sizeof *pl->h);
		pl->h[pl->nh++] = h;
		return 0;
	}
	if (map_keys(f, r, keys, e) || ref_tensor(pl, f, r, "x", &h.in, e) ||
	    get_int(f, r, "patch", 1, 1 << 20, &h.patch, e) ||
	    get_int(f, r, "class_tokens", 0, 64, &h.cls, e) || ref_tensor(pl, f, r, "out", &h.out, e))
		return -1;
	const PTensor *x = &pl->t[h.in], *y = &pl->t[h.out];
	int64_t p = h.patch;
	if (x->rank != 4 || y->rank != 3 ||
	    y->shape[0] != x->shape[0] || y->shape[1] != h.cls + (x->shape[2] / p) * (x->shape[3] / p) ||
	    y->shape[2] != x->shape[1] * p * p || x->fmt != y->fmt)
		return val_err(f, r, e, "patchify '%s': '%s' is not '%s' cut into %lld x %lld patches",
			       op, y->name, x->name, (long long)p, (long long)p);
	h.op = xstrdup(op);
	pl->h = xrealloc(pl->h, (size_t)(pl->nh + 1) * sizeof *pl->h);
	pl->h[pl->nh++] = h;
	return 0;
}

static int read_repeat(Plan *pl, const char *f, const Val *r, Err *e)
{
	static const char *keys[] = { "repeat", "steps", "count", NULL };
	Repeat x;
	const char *name;
	int64_t st[2];
	int n;
	const Val *v;

	memset(&x, 0, sizeof x);
	if (map_keys(f, r, keys, e) || get_str(f, r, "repeat", &name, e) ||
	    map_need(f, r, "steps", &v, e) || val_ints(f, v, 2, 0, pl->ns - 1, st, &n, e) ||
	    get_int(f, r, "count", 1, 1 << 20, &x.count, e))
		return -1;
	if (n != 2 || st[0] > st[1] || (pl->nr && st[0] <= pl->r[pl->nr - 1].last))
		return val_err(f, v, e, "steps must be [first, last], after the previous repeat");
	x.first = (int)st[0];
	x.last = (int)st[1];
	x.name = xstrdup(name);
	pl->r = xrealloc(pl->r, (size_t)(pl->nr + 1) * sizeof *pl->r);
	pl->r[pl->nr++] = x;
	return 0;
}

/* A provenance record: {tool, version, options, files: [{role, name, fnv1a}]}. */
static int read_prov(Plan *pl, const char *f, const Val *r, Err *e)
{
	static const char *keys[] = { "tool", "version", "options", "files", NULL };
	static const char *fkeys[] = { "role", "name", "fnv1a", NULL };
	const char *tool, *version, *options;
	const Val *files;
	Prov x;

	if (map_keys(f, r, keys, e) || get_str(f, r, "tool", &tool, e) || get_str(f, r, "version", &version, e) ||
	    get_str(f, r, "options", &options, e) || map_need(f, r, "files", &files, e))
		return -1;
	if (files->kind != VAL_SEQ)
		return val_err(f, files, e, "expected 'files' to be a sequence");
	if (files->n > PROV_FILES)
		return val_err(f, files, e, "at most %d files, found %d", PROV_FILES, files->n);
	const char *role[PROV_FILES], *name[PROV_FILES];
	uint64_t h[PROV_FILES];
	for (int i = 0; i < files->n; i++) {
		const Val *v = &files->items[i];
		const char *hex;
		if (v->kind != VAL_MAP)
			return val_err(f, v, e, "expected a file {role, name, fnv1a}");
		if (map_keys(f, v, fkeys, e) || get_str(f, v, "role", &role[i], e) ||
		    get_str(f, v, "name", &name[i], e) || get_str(f, v, "fnv1a", &hex, e))
			return -1;
		char *end;
		errno = 0;
		h[i] = strtoull(hex, &end, 16);
		if (strlen(hex) != 16 || *end || errno || !isxdigit((unsigned char)hex[0]))
			return val_err(f, map_get(v, "fnv1a"), e, "expected 16 hexadecimal digits, found '%s'", hex);
	}
	memset(&x, 0, sizeof x);
	x.tool = (char *)tool, x.version = (char *)version, x.options = (char *)options, x.nf = files->n;
	for (int i = 0; i < files->n; i++)
		x.f[i].role = (char *)role[i], x.f[i].name = (char *)name[i], x.f[i].fnv1a = h[i];
	plan_add_prov(pl, &x);
	return 0;
}

static int read_xfer(Plan *pl, const char *f, const Val *r, Err *e)
{
	Xfer x;
	if (xfer_read(f, r, pl->ns, pl->machine.tiles, pl->machine.sram_bytes, pl->machine.fragment_limit, &x, e))
		return -1;
	if (pl->s[x.step].kind != STEP_COPY)
		return val_err(f, map_get(r, "step"), e, "step %d is not a copy", x.step);
	if (pl->nx && x.step < pl->x[pl->nx - 1].step)
		return val_err(f, map_get(r, "step"), e, "transfers must follow step order");
	if (pl->stage >= STAGE_EXCHANGE && x.kind == X_SEND) {
		int in = 0;
		for (int p = 0; p < pl->nph && !in; p++)
			in = x.step >= pl->ph[p].first && x.step <= pl->ph[p].last;
		if (!in)
			return val_err(f, map_get(r, "step"), e, "a send on step %d, which no phase holds",
				       x.step);
	}
	plan_add_xfer(pl, &x);
	return 0;
}

typedef int (*ReadFn)(Plan *, const char *, const Val *, Err *);

int plan_read(Plan *pl, const char *path, Err *e)
{
	return plan_read_stage(pl, path, STAGE_PLAN, e);
}

static int read_from(Plan *pl, YReader *r, StageKind kind, Err *e);

int plan_read_stage(Plan *pl, const char *path, StageKind kind, Err *e)
{
	YReader r;
	memset(pl, 0, sizeof *pl);
	if (yr_open(&r, path, e)) {
		yr_close(&r);
		return -1;
	}
	return read_from(pl, &r, kind, e);
}

int plan_read_input(Plan *pl, Input *in, StageKind kind, Err *e)
{
	YReader r;
	memset(pl, 0, sizeof *pl);
	if (yr_open_input(&r, in, e)) {
		yr_close(&r);
		return -1;
	}
	return read_from(pl, &r, kind, e);
}

static int read_from(Plan *pl, YReader *rr, StageKind kind, Err *e)
{
	static const struct { const char *key; ReadFn fn; StageKind from; } sections[] = {
		{ "tensors", read_tensor, STAGE_PLAN }, { "host", read_host, STAGE_PLAN },
		{ "gemms", read_gemm, STAGE_PLAN },
		{ "placements", read_placement, STAGE_PLAN }, { "steps", read_step, STAGE_PLAN },
		{ "repeats", read_repeat, STAGE_PLAN },
		{ "phases", read_phase, STAGE_EXCHANGE }, { "transfers", read_xfer, STAGE_EXPAND },
	};
	YReader *r = rr;
	int rc = -1;

	pl->stage = kind;
	int version;
	if (stage_read_header(r, stage_format(kind), PLAN_VERSION_OLDEST, PLAN_VERSION, &version, &pl->machine,
			      &pl->model, e))
		goto out;
	reading_version = version;
	if (version >= 5) {
		Val *rec;
		int more;
		if (stage_section(r, "provenance", e))
			goto out;
		while ((more = stage_record(r, &rec, e)) > 0) {
			if (read_prov(pl, r->name, rec, e))
				goto out;
			yr_reset(r);
		}
		if (more < 0)
			goto out;
	}
	for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
		Val *rec;
		int more;
		if (kind < sections[i].from)
			continue;
		if (stage_section(r, sections[i].key, e))
			goto out;
		while ((more = stage_record(r, &rec, e)) > 0) {
			if (sections[i].fn(pl, r->name, rec, e))
				goto out;
			yr_reset(r);
		}
		if (more < 0)
			goto out;
	}
	if (yr_end(r, e) || plan_check(pl, r->name, e))
		goto out;
	rc = 0;
out:
	yr_close(r);
	if (rc)
		plan_free(pl);
	return rc;
}
