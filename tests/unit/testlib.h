/* testlib.h: what the lowering tests share: a small test machine, and
 * the largest uniform cut of n units into at most want parts. */
#ifndef AMP_TESTLIB_H
#define AMP_TESTLIB_H

#include <string.h>

#include "model/machine.h"
#include "stage/place.h"

static inline int64_t t_parts(int64_t n, int64_t want)
{
	if (want > n)
		want = n;
	while (want > 1 && !uniform_ok(n, want))
		want--;
	return want < 1 ? 1 : want;
}

/* amp1472's parameters on `tiles` tiles of 256 KiB, nothing reserved. */
static inline Machine test_machine(int64_t tiles)
{
	Machine m;
	memset(&m, 0, sizeof m);
	m.name = "test";
	m.tiles = tiles;
	m.sram_bytes = 1 << 18;
	m.reserved_bytes = 0;
	m.exchange_bytes_per_cycle = 4;
	m.sync_cycles = 600;
	m.send_control_cycles = 2;
	m.receive_control_cycles = 3;
	m.max_transfer_bytes = 16592;
	m.table_budget_bytes = 81920;
	m.fragment_limit = 16384;
	m.local_copy_bytes_per_cycle = 8;
	m.matmul_call_cycles = 200;
	m.elementwise_cycles_per_element = 1;
	m.reduction_cycles_per_element = 2;
	m.macs_fp16 = 64;
	m.macs_fp8 = 128;
	return m;
}

#endif
