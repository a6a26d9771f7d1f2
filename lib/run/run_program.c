/* run_program.c: run_program (lib/run/run.h; docs/machine.md §8): the
 * values encoded into the bytes the tiles hold, the SRAM images filled,
 * and the program's steps run in order, a repeat's body once per
 * iteration: compute steps by run_compute.c, exchange phases by
 * run_exchange.c, each phase's destinations checked byte for byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/run_int.h"

/* Tensor t's expected bytes into v->enc[t] (Values, run_int.h). */
static void enc_update(Values *v, int t)
{
	const PTensor *x = &v->pl->t[t];
	int64_t n = tensor_values(x), size = tensor_count(x);
	int esz = fmt_bytes(x->fmt);
	DataSpec d = run_plan_spec(v->pl, t);
	int lz = !v->val[t] && (x->role == R_PARAM || x->role == R_INPUT) && run_lazy_spec(&d, v->o);
	if (!v->val[t] && !lz)
		return;
	if (!v->enc[t])
		v->enc[t] = xmalloc((size_t)(n * esz));
	if (!lz) {
		run_encode_run(v->val[t], NULL, n, x->fmt, x->scale, v->enc[t]);
		return;
	}
	float *buf = xmalloc((size_t)size * sizeof *buf);
	for (int64_t i = 0; i < x->count; i++)          /* encoded on the generating threads */
		run_instance_data(&d, v->o, i, buf, v->enc[t] + i * size * esz);
	free(buf);
	if (v->o->cache && run_cacheable(&d))       /* the reference decodes these */
		run_cache_put(v->o->cache, &d, v->o->seed, v->enc[t]);
}

/* The movement check's expected bytes (the Sim's elem): copied from v->enc. */
static void elem_bytes(void *ctx, int t, int64_t e, int64_t n, uint8_t *out)
{
	const Values *v = ctx;
	int esz = fmt_bytes(v->pl->t[t].fmt);
	memcpy(out, v->enc[t] + e * esz, (size_t)(n * esz));
}

int run_program(const Program *prog, const Plan *pl, const RunOpts *o, float **val, Err *e)
{
	run_tables();
	RunMachine m;
	Values vs = { pl, o, val, xcalloc((size_t)pl->nt + 1, sizeof *vs.enc) };
	int rc = 0, ph = 0;

	memset(&m, 0, sizeof m);
	m.pl = pl;
	m.val = val;
	m.vs = &vs;
	double setup = run_now();
	for (int t = 0; t < pl->nt; t++)
		enc_update(&vs, t);
	run_cache_filled(o->cache);
	run_totals.encode_secs += run_now() - setup;
	m.e = e;
	m.ts = xcalloc((size_t)pl->np, sizeof *m.ts);
	m.stacked = xmalloc((size_t)pl->np + 1);
	for (int p = 0; p < pl->np; p++)
		m.stacked[p] = (uint8_t)plan_stacked(pl, p);
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 2; k++)
			m.kv[i][k].from.exec = m.kv[i][k].dfrom.exec = -1;
	sim_init(&m.s, &pl->machine, 0);
	m.s.elem = elem_bytes;
	m.s.elem_ctx = &vs;
	setup = run_now();
	for (int p = 0; p < pl->np; p++)
		if (plan_writer(pl, p) < 0 || plan_state_home(pl, p))  /* a state's home starts with its values */
			sim_fill(&m.s, pl, p);
	run_totals.fill_secs += run_now() - setup;
	int rep = -1, runs = 0, done = 0;
	for (int p = 0; o->progress && p < pl->nph; p++)
		runs += (int)plan_step_count(pl, pl->ph[p].first);
	for (int i = 0; !rc;) {
		if (rep >= 0 && i > pl->r[rep].last) {
			if (++m.s.iter < pl->r[rep].count) {
				i = pl->r[rep].first;   /* the next iteration runs the same body */
				ph = 0;
				continue;
			}
			m.s.iter = 0;
			rep = -1;
		}
		if (i >= pl->ns)
			break;
		if (rep < 0 && (rep = plan_repeat_of(pl, i)) >= 0)
			m.s.iter = 0;           /* entering a repeat */
		while (ph < pl->nph && pl->ph[ph].last < i)
			ph++;
		double t0 = run_now();
		if (pl->s[i].kind == STEP_COMPUTE) {
			rc = run_compute_step(&m, i);
			if (!rc && o->opcheck)
				rc = run_opcheck_step(o->opcheck, i, m.s.iter, vs.enc, e);
			i++;
			run_totals.compute_secs += run_now() - t0;
			continue;
		}
		if (ph < pl->nph && pl->ph[ph].first <= i) {
			if (o->progress) {
				char what[48];
				snprintf(what, sizeof what, "phase %d", ph);
				o->progress(o->progress_ctx, what, ++done, runs);
			}
			rc = run_phase(&m, prog, ph, pl->ph[ph].first, pl->ph[ph].last);
			i = pl->ph[ph].last + 1;
		} else {
			rc = run_phase(&m, prog, -1, i, i);     /* on-tile copies only */
			i++;
		}
		run_totals.phase_secs += run_now() - t0;
	}
	if (rc && rep >= 0) {
		char why[sizeof e->msg];
		memcpy(why, e->msg, sizeof why);
		errf(e, "iteration %lld of repeat '%s': %s", (long long)m.s.iter, pl->r[rep].name, why);
	}
	for (int p = 0; p < pl->np; p++)
		free(m.ts[p].shard);
	for (int i = 0; i < 2; i++) {
		for (int j = 0; j < 4; j++)
			free(m.scr[i][j]);
		for (int k = 0; k < 2; k++)
			free(m.kv[i][k].p), free(m.kv[i][k].dec);
	}
	run_cache_filled(o->cache);
	for (int t = 0; t < pl->nt; t++)
		if (!run_cache_holds(o->cache, vs.enc[t]))
			free(vs.enc[t]);
	free(vs.enc);
	free(m.ts);
	free(m.stacked);
	run_exchange_free(&m);
	sim_free(&m.s);
	return rc;
}
