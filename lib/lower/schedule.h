/* schedule: the order of every exchange phase's transfers (docs/machine.md
 * §6 "Schedule"; amp-group).
 *
 * A phase's order is its tiles' instruction order, and it decides the
 * phase's modelled cycles (lib/cost/replay.h: a fragment starts when its sender
 * and every receiver are free). Record order, which is program order, is
 * one legal schedule, often a poor one: a reduction whose K senders all
 * send to the same receiver first runs at several times its floor.
 *
 * What may move: the send fragments of one copy step, among themselves.
 * Steps keep program order on every tile (the records of a phase stay
 * grouped by step, as amp-run reads them), so every dependency between
 * steps (a read after a write, a write after a read or a write of the
 * same bytes) keeps its order. Inside a step the sends read its source and
 * write its destination, disjoint bytes, so any order is legal, except in
 * a step where a send reads the step's own destination (a forward: it must
 * follow the receive of its bytes): such a step keeps record order. Every
 * (sender, first receiver) pair keeps its order too, so a family of
 * fragments between two tiles stays in address order. Local copies and
 * zero fills keep their records and places.
 *
 * The order is a list schedule on the replay itself: of every pair's next
 * fragment, the one that can start earliest is issued next (ties: the
 * earlier in record order), the replay's state advancing as it does when
 * the phase is replayed. The fragments are then written as records in
 * that order and regular runs folded back into families (xfer_compress).
 *
 * Two list schedules are made for each phase: the exact one above, and
 * a faster approximation in which, of the pairs waiting for one busy
 * tile, only the first in record order is examined again as that tile
 * takes fragments (the others wait parked on it); the exact one gives up
 * past SCHEDULE_POPS_PER_UNIT examinations per unit of its step and
 * SCHEDULE_POPS_EXTRA more (small steps, such as an all-to-all among a
 * few tiles, need more per unit than large ones), and keeps the rest of
 * its step in record order: on every shipped model 4 per unit give the
 * same cycles, tables and fragments as 8 (before staging spread the
 * 27-layer SigLIP lost up to 6,912 cycles at 4; its spread gathers'
 * steps of 52,448 one-fragment units use the whole budget, and halving
 * it saves about a second of amp-group). A third order is no list
 * schedule: an all-to-all's rounds, each unit's round its first
 * receiver's offset from its sender modulo the widest span of tiles one
 * receiver hears from or one sender sends to, then record order; in a
 * step whose tiles form groups of that span (attention's partials), the
 * units of a round share no tile. A fourth is diagonals: a unit's round
 * is (a + b) mod M, a its rank among its sender's units (by receiver
 * tile), b its rank among its first receiver's (by sender tile), M the
 * most units one tile sends or first receives; where senders and receivers
 * form complete groups whatever their tile numbers (a GEMM's output
 * cut back to whole rows, rows gathered into staging blocks: SigLIP's
 * mlp_up.out at 2.5 times its floor, mlp_down.a at 3.7), each round has
 * every sender once and every receiver at most once, about M rounds of
 * one unit in all; a pair's later unit goes in no earlier round than its
 * earlier one (past M a round wraps to 0). Diagonals are made twice, each
 * round's units in record order and by sender tile (which folds into
 * fewer records where a group's senders are consecutive tiles: Qwen's
 * prefill). The fastest of the five (by the replay of the order written)
 * is the candidate.
 *
 * A phase takes the candidate only when its replay is faster than record
 * order's, by at least per_record cycles (one run of the phase: a repeat
 * body's order does not depend on its count, so the body's records stay
 * the same whatever the count) for each record it adds to the stage (an
 * order that folds badly is not worth its lines; amp-group uses
 * SCHEDULE_CYCLES_PER_RECORD, a quarter of a cycle: diagonals fold into
 * a few families per round, thousands of records in a large phase, and at
 * one cycle a record SigLIP's phases above kept record order; at a
 * quarter the 1-layer SigLIP's stage grows from 1,435 to 30,602 records
 * and its exchange falls from 261,895 to 244,946 cycles, its floors'
 * 239,390). The tables
 * may grow: a receive that no longer continues the previous one of its
 * row costs 4 B more (lib/stage/table.h). When the scheduled plan would then be
 * over the machine's table budget, fragment limit or SRAM with tables on
 * some tile, the orders are picked again, taking only those that
 * grow no tile's row of their phase, so a plan that fits keeps fitting.
 * No phase gets slower.
 */
#ifndef AMP_SCHEDULE_H
#define AMP_SCHEDULE_H

#include <stdint.h>

#include "stage/plan.h"

typedef struct {
	int phases;             /* phases whose order changed */
	int64_t before, after;  /* modelled exchange cycles of every phase, once each */
} ScheduleStats;

#define SCHEDULE_CYCLES_PER_RECORD 0.25
#define SCHEDULE_POPS_PER_UNIT 4
#define SCHEDULE_POPS_EXTRA 4096        /* and these more, for the small steps */

/* Orders every phase of a grouped plan (stats may be NULL). Fails only on
 * records out of step order. */
int plan_schedule(Plan *pl, double per_record, ScheduleStats *stats, Err *e);

#endif
