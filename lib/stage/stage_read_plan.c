/* stage_read_plan: the records of amp-plan's sections (provenance,
 * tensors, host, gemms, placements, steps, repeats), which every stage
 * format carries; stage_read.c reads the frame and the later formats'
 * sections, and calls these. */
#include "stage/plan_check.h"
#include "stage/stage_read.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	if ((*out = plan_name_lookup(names, n, s)) < 0)
		return val_err(f, map_get(r, key), e, "unknown %s '%s'", key, s);
	return 0;
}

/* A step key a version added that only one compute kind takes (v its
 * value): refused on another kind, or before that version. */
static int step_key(const char *f, const Val *v, ComputeKind k, ComputeKind want, const char *key, int version,
		    int since, Err *e)
{
	if (k != want)
		return val_err(f, v, e, "only %s takes %s", compute_names[want], key);
	if (version < since)
		return val_err(f, v, e, "%s needs version %d (this file is version %d)", key, since, version);
	return 0;
}

/* A key written only when it holds its one word (v its value). */
static int one_word(const char *f, const Val *v, const char *word, const char *what, Err *e)
{
	if (v->kind != VAL_SCALAR || strcmp(v->s, word))
		return val_err(f, v, e, "%s", what);
	return 0;
}

/* A name a stage defines (a tensor's, a placement's, an op's): at most
 * STAGE_NAME_MAX bytes (formats/stage.md; libyaml has refused invalid
 * UTF-8 already). */
static int get_name(const char *f, const Val *r, const char *key, const char **s, Err *e)
{
	if (get_str(f, r, key, s, e))
		return -1;
	size_t n = strlen(*s);
	if (n > STAGE_NAME_MAX)
		return val_err(f, map_get(r, key), e, "%s %s of %zu bytes, over a stage's limit of %d",
			       strcmp(key, "op") ? "a" : "an", key, n, STAGE_NAME_MAX);
	return 0;
}

static int unique(const char *f, const Val *r, const char *name, int exists, Err *e)
{
	if (exists)
		return val_err(f, map_get(r, "name"), e, "'%s' is defined twice", name);
	return 0;
}


static int read_tensor(Plan *pl, const char *f, const Val *r, int version, Err *e)
{
	static const char *keys[] = { "name", "role", "shape", "dtype", "scale", "count", NULL };
	PTensor t;
	const char *name;
	int role, fmt;
	int64_t scale = 0;

	memset(&t, 0, sizeof t);
	if (map_keys(f, r, keys, e) || get_name(f, r, "name", &name, e) ||
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
	if (role == R_STATE && version < 8)
		return val_err(f, map_get(r, "role"), e, "role state needs version 8 (this file is version %d)",
			       version);
	if (fmt == FMT_I32 && version < 7)
		return val_err(f, map_get(r, "dtype"), e, "dtype int32 needs version 7 (this file is version %d)",
			       version);
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

static int read_gemm(Plan *pl, const char *f, const Val *r, int version, Err *e)
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
	if (map_keys(f, r, keys, e) || get_name(f, r, "op", &op, e) ||
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
	if (staging == STAGING_SPREAD && version < 6)
		return val_err(f, map_get(r, "staging"), e, "staging 'spread' needs version 6 (this file is version %d)",
			       version);
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

static int read_placement(Plan *pl, const char *f, const Val *r, int version, Err *e)
{
	(void)version;                  /* no field of this record changed with the version */
	static const char *keys[] = { "name", "tensor", "layout", "split", "block", "base",
				      "stride", "rep", "rstride", "offset", "extent", "addr", NULL };
	static const char *const lays[] = { "row-major", "amp-left", "transposed-right", "amp-output" };
	Placement p;
	const char *name;
	const Val *v;
	int lay, n;
	const int64_t big = INT64_C(1) << 40;

	memset(&p, 0, sizeof p);
	if (map_keys(f, r, keys, e) || get_name(f, r, "name", &name, e) ||
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

/* Compute step s's eps: a norm's, or (version 13) a reduce's that reads
 * a folded rmsnorm's row sums; no other step takes one. */
static int step_eps(const Plan *pl, const char *f, const Val *r, Step *s, int version, Err *e)
{
	int bias, sums;
	const Val *v;
	plan_reduce_inputs(pl, s, &bias, &sums);
	/* (a mul by a vector: a folded norm's, or a per-channel scale, which
	 * the stage spells alike, came with version 13) */
	int vec = s->compute == C_MUL && s->nin == 2 && pl->p[s->in[1]].rank == 1;
	if ((sums >= 0 || vec) && version < 13)
		return val_err(f, map_get(r, "in"), e, "a folded rmsnorm (%s) needs version 13 (this file is "
			       "version %d)", sums >= 0 ? "a reduce reading row sums of squares" : "a mul by a vector",
			       version);
	int norm = s->compute == C_LAYERNORM || s->compute == C_RMSNORM || sums >= 0;
	if (norm && (map_need(f, r, "eps", &v, e) || val_f64(f, v, &s->eps, e)))
		return -1;
	if (!norm && map_get(r, "eps"))
		return val_err(f, map_get(r, "eps"), e, "only layernorm, rmsnorm and a reduce reading row sums "
			       "of squares take eps");
	return 0;
}

/* An fp16 attention partial (version 14): written by an attention step,
 * read by a merge; an fp8 attention result (version 17: a fused cast),
 * written by either. */
static int step_partial(const Plan *pl, const char *f, const Val *r, const Step *s, int version, Err *e)
{
	int at = s->compute == C_ATTENTION ? s->out : s->compute == C_MERGE ? s->in[0] : -1;
	if (at >= 0 && version < 17 && pl->p[s->out].fmt == FMT_FP8)
		return val_err(f, map_get(r, "out"), e, "an fp8 attention result ('%s', a fused cast) needs "
			       "version 17 (this file is version %d)", pl->p[s->out].name, version);
	if (at < 0 || version >= 14 || pl->p[at].fmt != FMT_FP16 || pl->t[pl->p[at].tensor].role != R_PARTIAL)
		return 0;
	return val_err(f, map_get(r, s->compute == C_ATTENTION ? "out" : "in"), e, "an fp16 attention partial "
		       "('%s') needs version 14 (this file is version %d)", pl->p[at].name, version);
}

/* A rope step's keys (s: the step read so far, its compute kind known):
 * heads, head_dim, theta, head_stride (version 11), pairs (12), scaling
 * (15), patch_grid and class_tokens (16); each refused on another step. */
static int rope_keys(const char *f, const Val *r, Step *s, int version, Err *e)
{
	const Val *v;
	if (s->compute == C_ROPE &&
	    (get_int(f, r, "heads", 1, 1 << 20, &s->heads, e) || get_int(f, r, "head_dim", 2, 1 << 20, &s->head_dim, e) ||
	     map_need(f, r, "theta", &v, e) || val_f64(f, v, &s->theta, e)))
		return -1;
	if (s->compute == C_ROPE && (s->head_dim % 2 || !(s->theta > 1) || !isfinite(s->theta)))
		return val_err(f, r, e, "rope needs an even head_dim and a theta above 1");
	s->head_stride = s->head_dim;
	if ((v = map_get(r, "head_stride")) &&
	    (step_key(f, v, s->compute, C_ROPE, "head_stride", version, 11, e) ||
	     get_int(f, r, "head_stride", s->head_dim, 1 << 20, &s->head_stride, e)))
		return -1;
	if ((v = map_get(r, "pairs")) &&
	    (step_key(f, v, s->compute, C_ROPE, "pairs", version, 12, e) ||
	     one_word(f, v, "interleaved", "pairs is 'interleaved' when given (absent: half)", e)))
		return -1;
	s->interleaved = v != NULL;
	const Val *opv = map_get(r, "op");     /* (its name checked below, with every step's) */
	if ((v = map_get(r, "scaling")) &&
	    (step_key(f, v, s->compute, C_ROPE, "scaling", version, 15, e) ||
	     rope_scale_read(f, v, opv && opv->kind == VAL_SCALAR ? opv->s : "?", &s->rope_scale, e)))
		return -1;
	if ((v = map_get(r, "patch_grid"))) {
		int64_t rc[2];
		int n;
		if (step_key(f, v, s->compute, C_ROPE, "patch_grid", version, 16, e) ||
		    val_ints(f, v, 2, 1, 1 << 15, rc, &n, e))
			return -1;
		if (n != 2 || s->head_dim % 4)
			return val_err(f, v, e, "patch_grid is [rows, columns], on a rope whose head_dim is a multiple of 4");
		s->rope_grid.rows = rc[0], s->rope_grid.cols = rc[1];
	}
	if ((v = map_get(r, "class_tokens")) &&
	    (step_key(f, v, s->compute, C_ROPE, "class_tokens", version, 16, e) ||
	     (!s->rope_grid.rows ? val_err(f, v, e, "class_tokens goes with patch_grid") :
	      get_int(f, r, "class_tokens", 0, 64, &s->rope_grid.cls, e))))
		return -1;
	if (s->compute == C_ROPE && (s->nin == 2) == (s->rope_grid.rows > 0))
		return val_err(f, map_get(r, "in"), e, "rope reads x and its positions, or x alone with a patch_grid");
	return 0;
}

static int read_step(Plan *pl, const char *f, const Val *r, int version, Err *e)
{
	static const char *copy_keys[] = { "step", "copy", "op", "operand", "map", "src", "dst", NULL };
	static const char *comp_keys[] = { "step", "compute", "op", "in", "out", "eps", "heads", "kv_heads",
					   "causal", "scale", "scratch", "head_dim", "theta", "first", "chunks",
					   "head_stride", "kv_order", "pairs", "scaling", "patch_grid", "class_tokens",
					   NULL };
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
		if (s.operand == OPD_POS && version < 8)
			return val_err(f, map_get(r, "operand"), e, "operand 'positions' needs version 8 (this file "
				       "is version %d)", version);
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
		if (version < compute_since(s.compute))
			return val_err(f, map_get(r, "compute"), e, "compute '%s' needs version %d (this file is "
				       "version %d)", compute_names[k], compute_since(s.compute), version);
		if (map_need(f, r, "in", &v, e))
			return -1;
		if (v->kind != VAL_SEQ || v->n < 1 || v->n > 4)
			return val_err(f, v, e, "expected a list of 1 to 4 placements");
		if (v->n == 3 && s.compute == C_RMSNORM && version < 10)
			return val_err(f, v, e, "rmsnorm reading its rows' sums of squares (3 placements) needs "
				       "version 10 (this file is version %d)", version);
		if (v->n == 4 && (s.compute != C_ATTENTION || version < 8))
			return val_err(f, v, e, "only attention reads 4 placements (its positions; version 8)");
		for (int i = 0; i < v->n; i++)
			if (ref_placement(pl, f, &v->items[i], &s.in[i], e))
				return -1;
		s.nin = v->n;
		if (map_need(f, r, "out", &v, e) || ref_placement(pl, f, v, &s.out, e))
			return -1;
		if (step_eps(pl, f, r, &s, version, e))
			return -1;
		if (s.compute == C_ATTENTION &&
		    (get_int(f, r, "heads", 1, 1 << 20, &s.heads, e) ||
		     map_need(f, r, "scale", &v, e) || val_f64(f, v, &s.scale, e) ||
		     get_int(f, r, "scratch", 0, pl->machine.sram_bytes, &s.scratch, e)))
			return -1;
		if (rope_keys(f, r, &s, version, e))
			return -1;
		if ((v = map_get(r, "kv_order")) &&
		    (step_key(f, v, s.compute, C_ATTENTION, "kv_order", version, 11, e) ||
		     one_word(f, v, "heads", "kv_order is 'heads' (written only then)", e)))
			return -1;
		s.kv_order = v != NULL;
		if (s.compute != C_ROPE && (map_get(r, "head_dim") || map_get(r, "theta")))
			return val_err(f, map_get(r, map_get(r, "head_dim") ? "head_dim" : "theta"), e,
				       "only rope takes head_dim and theta");
		if (s.compute != C_ATTENTION && (map_get(r, "scale") || (s.compute != C_ROPE && map_get(r, "heads")) ||
						 map_get(r, "scratch") || map_get(r, "kv_heads") || map_get(r, "causal")))
			return val_err(f, map_get(r, map_get(r, "scale") ? "scale" : map_get(r, "heads") ? "heads" :
						  map_get(r, "scratch") ? "scratch" : map_get(r, "kv_heads") ? "kv_heads" :
						  "causal"), e, "only attention takes heads, kv_heads, causal, scale and scratch");
		s.kv_heads = s.heads;
		if ((map_get(r, "kv_heads") || map_get(r, "causal")) && version < 7)
			return val_err(f, map_get(r, map_get(r, "kv_heads") ? "kv_heads" : "causal"), e,
				       "%s needs version 7 (this file is version %d)",
				       map_get(r, "kv_heads") ? "kv_heads" : "causal", version);
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
		if (map_get(r, "chunks") && version < 9)
			return val_err(f, map_get(r, "chunks"), e, "chunks needs version 9 (this file is version %d)",
				       version);
		if (map_get(r, "chunks") && get_int(f, r, "chunks", 1, 1 << 20, &s.chunks, e))
			return -1;
		s.first = -1;
		if (map_get(r, "first") && (s.compute != C_APPEND ||
					    get_int(f, r, "first", 0, INT64_C(1) << 30, &s.first, e)))
			return s.compute != C_APPEND ? val_err(f, map_get(r, "first"), e, "only append takes first") : -1;
		if (step_partial(pl, f, r, &s, version, e))
			return -1;
	} else {
		return val_err(f, r, e, "a step needs 'copy' or 'compute'");
	}
	if (get_name(f, r, "op", &op, e))
		return -1;
	s.op = xstrdup(op);
	pl->s = xrealloc(pl->s, (size_t)(pl->ns + 1) * sizeof *pl->s);
	pl->s[pl->ns++] = s;
	if (plan_check_step(pl, pl->ns - 1, e))
		return val_err(f, r, e, "%s", e->msg);
	return 0;
}

static int read_embed(Plan *pl, const char *f, const Val *r, int version, const char *op, Host *h, Err *e)
{
	static const char *keys[] = { "op", "host", "x", "table", "transposed", "out", NULL };
	if (version < 8)
		return val_err(f, map_get(r, "host"), e, "host 'embed' needs version 8 (this file is version %d)",
			       version);
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

static int read_host(Plan *pl, const char *f, const Val *r, int version, Err *e)
{
	static const char *keys[] = { "op", "host", "x", "patch", "class_tokens", "out", NULL };
	static const char *const kinds[] = { "patchify", "embed" };
	Host h;
	const char *op;
	int k;

	memset(&h, 0, sizeof h);
	if (get_name(f, r, "op", &op, e) || ref_enum(f, r, "host", kinds, 2, &k, e))
		return -1;
	h.kind = (HostKind)k;
	if (h.kind == HOST_EMBED) {
		if (read_embed(pl, f, r, version, op, &h, e))
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

static int read_repeat(Plan *pl, const char *f, const Val *r, int version, Err *e)
{
	(void)version;                  /* no field of this record changed with the version */
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
static int read_prov(Plan *pl, const char *f, const Val *r, int file_version, Err *e)
{
	(void)file_version;     /* no field of this record changed with the version */
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

const StageSection stage_provenance = { "provenance", read_prov, STAGE_PLAN };
const StageSection stage_plan_sections[] = {
	{ "tensors", read_tensor, STAGE_PLAN }, { "host", read_host, STAGE_PLAN },
	{ "gemms", read_gemm, STAGE_PLAN }, { "placements", read_placement, STAGE_PLAN },
	{ "steps", read_step, STAGE_PLAN }, { "repeats", read_repeat, STAGE_PLAN },
};
const int stage_plan_nsections = sizeof stage_plan_sections / sizeof stage_plan_sections[0];
