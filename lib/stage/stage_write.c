/* stage_write: writes a Plan as its stage's format (formats/plan.md):
 * amp-plan's sections, which every later stage carries, then amp-exchange's
 * phases (amp-exchange, amp-group) and amp-expand's transfers (amp-expand
 * onwards). */
#include "stage/stage_io.h"

#include <inttypes.h>
#include <stdio.h>

#include "stage/stage.h"

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
		int bias, sums;
		plan_reduce_inputs(pl, s, &bias, &sums);
		if (s->compute == C_LAYERNORM || s->compute == C_RMSNORM || sums >= 0) {
			yw_str(w, "eps");
			yw_f64(w, s->eps);
		}
		if (s->compute == C_APPEND && s->first >= 0)
			yw_kint(w, "first", s->first);
		if (s->compute == C_ROPE) {
			yw_kint(w, "heads", s->heads);
			yw_kint(w, "head_dim", s->head_dim);
			if (s->head_stride != s->head_dim)
				yw_kint(w, "head_stride", s->head_stride);
			if (s->interleaved)
				yw_kstr(w, "pairs", "interleaved");
			yw_str(w, "theta");
			yw_f64(w, s->theta);
			if (s->rope_scale.factor > 0)
				rope_scale_write(w, &s->rope_scale);
			if (s->rope_grid.rows > 0) {
				int64_t rc[2] = { s->rope_grid.rows, s->rope_grid.cols };
				yw_kints(w, "patch_grid", 2, rc);
				if (s->rope_grid.cls)
					yw_kint(w, "class_tokens", s->rope_grid.cls);
			}
		}
		if (s->compute == C_ATTENTION) {
			yw_kint(w, "heads", s->heads);
			if (s->kv_heads != s->heads)
				yw_kint(w, "kv_heads", s->kv_heads);
			if (s->causal)
				yw_kbool(w, "causal", 1);
			if (s->kv_order)
				yw_kstr(w, "kv_order", "heads");
			yw_str(w, "scale");
			yw_f64(w, s->scale);
			yw_kint(w, "scratch", s->scratch);
			if (s->chunks > 1)
				yw_kint(w, "chunks", s->chunks);
		}
	}
	yw_end_map(w);
}

int stage_write(const Plan *pl, Output *out, Err *e)
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
