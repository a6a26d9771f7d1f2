/* The planner's trial lowering (lib/planner/trial.h) against the lowering itself:
 * on random ViT-shaped models (vitgen.h: attention with and without key
 * blocks, repeats, MAP heads) planned by the memory objective with both
 * ownerships, every tile's fragments from plan_trial over the whole plan
 * equal the emitted tables' (table_totals after amp-compose, amp-expand,
 * amp-exchange and amp-group) but for one receive per copy whose buffer
 * the trial and the allocator share differently, and its table bytes are
 * an upper bound of them within the same allowance, never more than the
 * 8 B row entries of the phases amp-group merges plus 4 B per receive
 * above the true figure. FUZZ=1 runs more. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lower/compose.h"
#include "lower/exchange.h"
#include "lower/expand.h"
#include "lower/group.h"
#include "lower/lower.h"
#include "planner/planner.h"
#include "planner/planner_int.h"
#include "capture/capture.h"
#include "stage/limits.h"
#include "stage/plan_memory.h"
#include "stage/table.h"
#include "planner/trial.h"
#include "t.h"
#include "testlib.h"
#include "vitgen.h"

/* The trial's cycles hold one sync per phase of the lowering: with the
 * machine's sync_cycles S they exceed those with S = 0 by S times the
 * lowered plan q's phases, exactly (the replays and compute do not depend
 * on S). 1 when compared. */
static int sync_cycles(const Plan *pl, const Plan *q, int wd, const char *desc)
{
	Plan r;
	Err e;
	int64_t T = pl->machine.tiles, with = -1, without = -1;
	int64_t *tt = calloc((size_t)T, 8), *tf = calloc((size_t)T, 8);
	int done = 0;
	plan_dup(&r, pl);
	r.machine.sync_cycles = 0;
	if (plan_trial(pl, 0, pl->ns - 1, wd, tt, tf, &with, &e) == 0 &&
	    plan_trial(&r, 0, r.ns - 1, wd, tt, tf, &without, &e) == 0) {
		t_case("trial cycles hold the machine's sync once per phase of the lowering");
		CHECK(with - without == pl->machine.sync_cycles * q->nph && q->nph > 0 && pl->machine.sync_cycles > 0,
		      "%s: %lld cycles, %lld without sync; %d phases of %lld", desc, (long long)with,
		      (long long)without, q->nph, (long long)pl->machine.sync_cycles);
		done = 1;
	}
	free(tt), free(tf);
	plan_free(&r);
	return done;
}

/* One rule (lib/stage/limits.h) for the planner, amp-emit and the
 * scheduler. With the table budget or the fragment limit set to the worst
 * tile's figure the whole plan fits; one below, plan_fit refuses it with
 * that limit named, in the words limits_error gives the plan lowered as
 * plan_fit lowers it (amp-emit's check: tests/bats/amp-emit-limits.bats).
 * The SRAM: the lowered plan fits a machine whose SRAM for planned data is
 * its worst tile's tensors at their peak plus tables, not one byte less,
 * and plan_fit refuses that one (its addresses may fail first). */
static void one_rule(Plan *pl, const Fit *f0, const char *desc)
{
	static const LimitKind kinds[2] = { LIMIT_TABLE, LIMIT_FRAGMENTS };
	static const char *words[2] = { "over the table budget of", "over the fragment limit of" };
	Machine keep = pl->machine;
	Plan q;
	Err e, le;
	for (int k = 0; k < 3; k++)
		for (int64_t d = 0; d < 2; d++) {
			Fit f1;
			pl->machine = keep;
			if (k == 0)
				pl->machine.table_budget_bytes = f0->lim.table - d;
			else if (k == 1)
				pl->machine.fragment_limit = f0->lim.frags - d;
			else if (!d)
				continue;
			else                    /* sram_bytes - reserved_bytes = the worst tile's SRAM - 1 */
				pl->machine.reserved_bytes += machine_avail(&keep) - f0->lim.sram + d;
			plan_fit(pl, FIT_LIMITS, &f1);
			t_case("a whole plan fits each limit at its worst tile's figure, not one below, that limit named");
			CHECK(planner_fit_ok(&f1) == !d && (k == 2 || f1.over == (d ? kinds[k] : LIMIT_NONE)) &&
			      (!d || k == 2 || strstr(f1.why, words[k])), "%s: limit %d at its figure - %lld: %s",
			      desc, k, (long long)d, planner_fit_ok(&f1) ? "fits" : f1.why);
			if (!d || k == 2)
				continue;
			plan_dup(&q, pl);
			Lowering lw = lowering_default();
			lw.schedule = 0, lw.group = trial_group;
			if (lower_plan(&q, &lw, &e) == 0) {
				Limits l;
				limits_measure(&q, -1, &l, NULL, NULL, NULL, NULL);
				t_case("the planner refuses a plan in limits_error's words");
				CHECK(limits_error(&q, &l, NULL, 0, &le) && strcmp(le.msg, f1.why) == 0,
				      "%s: limits_error '%s', plan_fit '%s'", desc, le.msg, f1.why);
			}
			plan_free(&q);
		}
	pl->machine = keep;
	plan_dup(&q, pl);
	Lowering lw = lowering_default();
	lw.schedule = 0, lw.group = trial_group;
	if (lower_plan(&q, &lw, &e) == 0)
		for (int64_t d = 0; d < 2; d++) {
			Limits l;
			limits_measure(&q, f0->lim.sram - d, &l, NULL, NULL, NULL, NULL);
			t_case("a lowered plan fits SRAM of its worst tile's figure, not one byte less");
			CHECK(limits_over(&q, &l) == (d ? LIMIT_SRAM : LIMIT_NONE) &&
			      (!d || (limits_error(&q, &l, NULL, 0, &le) && strstr(le.msg, "over the ") &&
				      strstr(le.msg, "available for planned data (sram_bytes - reserved_bytes)"))),
			      "%s: SRAM %lld - %lld: %d", desc, (long long)f0->lim.sram, (long long)d,
			      (int)limits_over(&q, &l));
		}
	plan_free(&q);
}

int main(void)
{
	const char *fuzz = getenv("FUZZ");
	int n = fuzz && *fuzz ? 200 : 30;
	char path[] = "/tmp/amp-trial-XXXXXX", desc[512];
	int fd = mkstemp(path), checked_cycles = 0, fit_bounds = 0;
	close(fd);

	for (int i = 0; i < n; i++) {
		int64_t tiles = t_pick(16, 200);
		Machine mc = test_machine(tiles);
		Model md;
		Plan pl, q;
		PlanOpts po = { OBJ_MEMORY, 0, NULL, t_rnd() % 2 ? OWN_TOKENS : OWN_BATCH, 1, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 };
		Err e;

		vit_model(path, desc, sizeof desc);
		if (model_load(&md, path, &e)) {
			t_case("random model loads");
			CHECK(0, "%s: %s", desc, e.msg);
			continue;
		}
		if (plan_build(&pl, &md, &mc, &po, NULL, &e)) {
			model_free(&md);
			continue;               /* pinned key blocks the machine cannot hold */
		}
		/* The whole plan's fit at its limit: a fragment limit equal to
		 * the worst tile's fits; 2% below it, or one below, does not. */
		Fit f0, f1;
		plan_fit(&pl, FIT_LIMITS, &f0);
		if (planner_fit_ok(&f0) && f0.lim.frags >= 100) {
			int64_t keep = pl.machine.fragment_limit;
			int64_t limits[3] = { f0.lim.frags, f0.lim.frags * 100 / 102, f0.lim.frags - 1 };
			for (int k = 0; k < 3; k++) {
				pl.machine.fragment_limit = limits[k];
				plan_fit(&pl, FIT_LIMITS, &f1);
				t_case("a whole plan fits a fragment limit equal to its worst tile's, not 2% or 1 below");
				CHECK(planner_fit_ok(&f1) == (k == 0) && f1.lim.frags == f0.lim.frags,
				      "%s: %lld fragments, limit %lld: %s", desc, (long long)f1.lim.frags,
				      (long long)limits[k], planner_fit_ok(&f1) ? "fits" : "does not fit");
			}
			pl.machine.fragment_limit = keep;
			one_rule(&pl, &f0, desc);
			fit_bounds++;
		}
		int wd = (int)(t_rnd() % 3);        /* weights forwarded, direct or auto, both sides alike */
		int64_t *tt = calloc((size_t)tiles, 8), *tf = calloc((size_t)tiles, 8);
		int64_t *rt = calloc((size_t)tiles, 8), *rf = calloc((size_t)tiles, 8);
		t_case("trial lowering of a whole plan succeeds");
		int64_t cycles = -1;
		int ok = plan_trial(&pl, 0, pl.ns - 1, wd, tt, tf, &cycles, &e) == 0;
		CHECK(ok, "%s: %s", desc, e.msg);
		plan_dup(&q, &pl);
		t_case("the plan lowers");
		Lowering lw = lowering_default();       /* in record order, as the trial */
		lw.weights = wd, lw.schedule = 0;
		int low = lower_plan(&q, &lw, &e) == 0;
		CHECK(low, "%s: %s", desc, e.msg);
		if (ok && low) {
			table_totals(&q, rt, rf, NULL);
			/* Copies whose destination may share its source's buffer:
			 * the trial assumes it does wherever the regions match; the
			 * allocator, only where the address is free. Each such copy
			 * may differ by one receive (12 B) on a tile, no more. */
			int *fi = calloc((size_t)pl.np + 1, sizeof *fi), *la = calloc((size_t)pl.np + 1, sizeof *la);
			int *al = calloc((size_t)pl.np + 1, sizeof *al), shared = 0;
			plan_lifetimes(&pl, fi, la, al);
			for (int s = 0; s < pl.ns; s++)
				shared += pl.s[s].kind == STEP_COPY && al[pl.s[s].dst] == pl.s[s].src;
			free(fi), free(la), free(al);
			/* Cycles: every phase's replay, its sync, the local copies and
			 * the compute steps, as amp-capture counts them; once each,
			 * so a plan without a repeat has the capture's total (and,
			 * with no copy sharing its source's buffer, the same rows
			 * and replays). */
			checked_cycles += sync_cycles(&pl, &q, wd, desc);
			t_case("trial fragments equal the lowering's on every tile, but for buffers shared or not");
			for (int64_t t = 0; t < tiles; t++)
				if (llabs(tf[t] - rf[t]) > shared) {
					CHECK(0, "%s: tile %lld: trial %lld fragments, lowering %lld (%d sharing copies)",
					      desc, (long long)t, (long long)tf[t], (long long)rf[t], shared);
					break;
				}
			t_case("trial table bytes bound the lowering's from above, within merged rows and receives");
			for (int64_t t = 0; t < tiles; t++)
				if (tt[t] + 12 * shared < rt[t] || tt[t] > rt[t] + 8 * pl.ns + 4 * rf[t] + 12 * shared) {
					CHECK(0, "%s: tile %lld: trial %lld table bytes, lowering %lld", desc, (long long)t,
					      (long long)tt[t], (long long)rt[t]);
					break;
				}
		}
		free(tt), free(tf), free(rt), free(rf);
		plan_free(&q);
		plan_free(&pl);
		model_free(&md);
	}
	t_case("whole plans were held at their fragment limit");
	CHECK(fit_bounds >= 5, "only %d of %d", fit_bounds, n);
	t_case("the sync in trial cycles was compared");
	CHECK(checked_cycles > 0, "none of %d", n);
	unlink(path);
	return t_summary();
}
