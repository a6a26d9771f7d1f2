/* machine: the machine description (docs/machine.md §2, §10).
 *
 * Read from a machine file (formats/machine.md, `amp-machine: 4`; 3
 * without chips and links, 2 without the clock too) or from
 * a stage file's header (one chip). Every parameter is required, is a non-negative
 * integer, and unknown keys are rejected, each error naming file:line:col.
 */
#ifndef AMP_MACHINE_H
#define AMP_MACHINE_H

#include <stdint.h>

#include "base/diag.h"
#include "base/yio.h"

/* How the chips of a machine of several are joined (formats/machine.md,
 * "Chips and links"): a ring of chips, or a rows x columns torus. */
typedef enum { TOPOLOGY_RING, TOPOLOGY_TORUS } Topology;

typedef struct {
	Topology topology;
	int64_t rows, columns;          /* a torus: rows x columns = chips; a ring: 1 x chips */
	int64_t bandwidth_bytes_per_cycle;      /* per link and direction */
	int64_t latency_cycles;         /* per transfer, on top of its bytes at the bandwidth */
	int64_t sync_cycles;            /* a barrier across every chip */
	/* where each figure comes from: kept for the process's life, as the
	 * name is */
	const char *topology_source, *bandwidth_source, *latency_source, *sync_source;
} Links;

typedef struct {
	/* any length: a pointer into a pool of names kept for the process's
	 * life (machine.c), so that a Machine stays a value that a Plan holds
	 * and every reader, trial and tool copies with `=` and never frees */
	const char *name;
	int64_t tiles;
	int64_t sram_bytes;
	int64_t reserved_bytes;
	int64_t exchange_bytes_per_cycle;
	int64_t sync_cycles;
	int64_t send_control_cycles;
	int64_t receive_control_cycles;
	int64_t max_transfer_bytes;
	int64_t table_budget_bytes;
	int64_t fragment_limit;
	int64_t local_copy_bytes_per_cycle;
	/* the compute cost model (lib/cost/cost.h) */
	int64_t matmul_call_cycles;             /* per matrix-unit call, per tile */
	int64_t elementwise_cycles_per_element; /* gelu, add, cast */
	int64_t reduction_cycles_per_element;   /* layernorm, reduction of partials */
	int64_t macs_fp16;      /* amp_macs_per_cycle.fp16 */
	int64_t macs_fp8;       /* amp_macs_per_cycle.fp8 */
	/* the clock (version 3 files): it turns modelled cycles into time and
	 * nothing else, so stage headers do not carry it; 0 and "" when the
	 * file is version 2 (clock unknown) */
	int64_t clock_hz;
	const char *clock_source;       /* in the names' pool ("" when the clock is unknown) */
	/* chips of this kind (version 4 files; 1 otherwise, and in every
	 * stage header, since plans are built for one chip) and, when there
	 * are several, the links between them (zero when one) */
	int64_t chips;
	Links links;
} Machine;

#define MACHINE_VERSION 4       /* the version written; 2 and 3 are still read */
#define MACHINE_MAX_CHIPS 65536 /* the largest IPU-POD Graphcore describes (docs/machine.md §10) */
#define DEFAULT_MACHINE "share/machines/amp1472.yaml"

int machine_load(Machine *m, const char *path, Err *e);
/* The same from an input (taken over; NULL: -1, its error already in e),
 * e.g. a file's bytes already read to hash them. */
int machine_load_input(Machine *m, Input *in, Err *e);
/* From the `machine:` value of a stage header. */
int machine_from_val(Machine *m, const char *file, const Val *v, Err *e);
/* 0 when a stage header's machine is the machine file's (file_name, for
 * the message), every parameter equal; else an error naming the first
 * parameter that differs and both values. */
int machine_check_header(const Machine *hdr, const Machine *file, const char *file_name, Err *e);
/* 0 when m is one chip; else an error saying that m (read from path)
 * has m->chips chips and that plans across chips are not built yet:
 * every tool that plans for a machine asks this first, so that a
 * machine of several chips is never planned as one. */
int machine_check_one_chip(const Machine *m, const char *path, Err *e);
/* Writes the `machine:` value (one flow mapping; one chip, no clock). */
void machine_write(YWriter *w, const Machine *m);
/* Bytes of SRAM per tile available to planned data. */
static inline int64_t machine_avail(const Machine *m)
{
	return m->sram_bytes - m->reserved_bytes;
}

#endif
