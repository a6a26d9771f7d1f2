/* model_size: sizes checked before anything is allocated for them. A
 * model's shapes are bounded when read (model_elements), and a model is
 * held against a machine's SRAM before it is planned or calibrated
 * (model_check_size), so that a shape no machine could hold is an error
 * in microseconds, never an allocation that fails or a search that does
 * not end. */
#include "model/model.h"

#include <inttypes.h>
#include <stdio.h>

/* a * b, saturating at INT64_MAX (both non-negative) */
static int64_t sat_mul(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t model_elements(const MTensor *t)
{
	int64_t n = t->count > 0 ? t->count : 1;
	for (int d = 0; d < t->rank; d++)
		n = sat_mul(n, t->shape[d]);
	return n;
}

int64_t model_tensor_bytes(const MTensor *t)
{
	return sat_mul(model_elements(t), fmt_bytes(t->dtype));
}

/* "1.23 GB" */
static void human(int64_t b, char *s, size_t n)
{
	if (b == INT64_MAX)
		snprintf(s, n, "more than 9.2e18 bytes");
	else if (b >= 1000000000)
		snprintf(s, n, "%.2f GB", (double)b / 1e9);
	else
		snprintf(s, n, "%.1f MB", (double)b / 1e6);
}

int model_check_size(const Model *m, const Machine *mc, Err *e)
{
	int64_t cap = sat_mul(mc->tiles, machine_avail(mc)), worst = -1, params = 0;
	int wop = -1;
	int64_t wide = 0;       /* bytes of parameters wider than fp8 */
	/* parameters are resident for the whole program */
	for (int i = 0; i < m->nt; i++)
		if (m->t[i].role == T_PARAM) {
			params = sat_add(params, model_tensor_bytes(&m->t[i]));
			if (m->t[i].dtype != FMT_FP8)
				wide = sat_add(wide, model_tensor_bytes(&m->t[i]));
		}
	if (params > cap)
		return errf(e, "%s:%ld:%ld: model '%s': parameters need %" PRId64 " bytes; %" PRId64 " tiles hold at "
			    "most %" PRId64 " (%" PRId64 " bytes each after reserved_bytes)." NEXT_NO_PLAN "%s", m->file, m->params_line,
			    m->params_col, m->name, params, mc->tiles, cap, machine_avail(mc),
			    wide > params / 10 ? ", or fp8 parameters" : "");
	for (int i = 0; i < m->nops; i++) {
		const MOp *o = &m->ops[i];
		int seen[4], ns = 0;
		int64_t b = 0;
		for (int k = -1; k < o->nin; k++) {
			int t = k < 0 ? o->out : o->in[k], dup = 0;
			if (t < 0)
				continue;
			for (int j = 0; j < ns; j++)
				dup |= seen[j] == t;
			if (dup)
				continue;
			seen[ns++] = t;
			b = sat_add(b, model_tensor_bytes(&m->t[t]));
		}
		if (b > worst)
			worst = b, wop = i;
	}
	if (wop < 0 || worst <= cap)
		return 0;
	const MOp *o = &m->ops[wop];
	char need[48], have[48];
	human(worst, need, sizeof need);
	human(cap, have, sizeof have);
	return errf(e, "%s:%ld:%ld: op '%s' cannot be held by machine '%s': its operands and result, live at once, "
		    "are at least %" PRId64 " bytes (%s), and the machine holds %" PRId64 " (%s: %" PRId64
		    " tiles x %" PRId64 " bytes available). Next: plan a smaller batch, or " NEXT_MORE_TILES,
		    m->file, o->line, o->col, o->name, mc->name, worst,
		    need, cap, have, mc->tiles, machine_avail(mc));
}
