/* replay: the modelled exchange cycles of a phase (docs/machine.md §2).
 *
 * A model, not timing. Every tile has an in-order issue pipeline shared by
 * its sends and receives, one send port and one receive port, each moving
 * exchange_bytes_per_cycle. Fragments are taken in the phase's record and
 * member order (every tile's instruction order). For a fragment of L bytes
 * from tile s to receivers R:
 *
 *   issue[s] += send_control_cycles; for r in R: issue[r] += receive_control_cycles
 *   start = max(issue[s], send_free[s], dep, max over r of max(issue[r], recv_free[r]))
 *   end   = start + ceil(L / exchange_bytes_per_cycle)
 *   send_free[s] = end; recv_free[r] = end for r in R
 *
 * where dep is the latest end of an earlier fragment of the phase that
 * wrote bytes s now sends (a forward starts after the receive it depends
 * on). A phase's cycles are the latest issue or port time of any tile;
 * sync_cycles are reported separately.
 */
#ifndef AMP_REPLAY_H
#define AMP_REPLAY_H

#include <stdint.h>

#include "stage/plan.h"

int64_t phase_cycles(const Plan *pl, int phase);
/* The same, and per tile (busy[3 x tiles]): busy[t] its end (its last
 * issue or port time; 0 when idle), busy[tiles + t] the cycles its send
 * port moves bytes, busy[2 x tiles + t] its receive port's. The trace's
 * exchange slices. */
int64_t phase_cycles_tiles(const Plan *pl, int phase, int64_t *busy);
/* The replay of the send records x[0..n) alone, in order (one phase's). */
int64_t replay_records(const Plan *pl, const Xfer *x, int n);

/* The replay's state, one fragment at a time (lib/lower/schedule.c orders a
 * phase with it): replay_start is when fragment f would start if issued
 * next, replay_issue issues it (the update above) and returns its end,
 * replay_last is the phase's cycles so far. */
typedef struct {
	int64_t src, src_addr, dst_tile, dst_addr, len, nrecv, recv_step;
} Frag;
typedef struct Replay Replay;
Replay *replay_new(const Machine *m);
int64_t replay_start(const Replay *r, const Frag *f);
/* The same, and the tile whose port or pipeline sets that start (the
 * sender when it does, or nothing later does). */
int64_t replay_start_at(const Replay *r, const Frag *f, int64_t *tile);
int64_t replay_issue(Replay *r, const Frag *f);
int64_t replay_last(const Replay *r);
/* Declares every send the replay will issue (records x[0..n), members of
 * any kind but send ignored): a receive is then remembered for the
 * forward dependency only where some send of its tile reads near it (the
 * same figures, less work). Without it every receive is remembered. */
void replay_reads(Replay *r, const Xfer *x, int n);
void replay_free(Replay *r);

#endif
