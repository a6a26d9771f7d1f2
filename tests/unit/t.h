/* t.h: the unit-test harness. Each case is t_case(name); its CHECKs decide
 * whether it passed. t_summary prints "N passed, N failed" and returns the
 * exit status. Randomized tests call t_case once per random case and draw
 * from t_rnd, a xorshift64 each test seeds (t_rng) so its cases are fixed. */
#ifndef AMP_T_H
#define AMP_T_H

#include <stdint.h>
#include <stdio.h>

static int t_pass, t_fail, t_failed_now, t_open, t_msgs;
static const char *t_name;
static uint64_t t_rng = 0x2545f4914f6cdd1du;

static inline uint64_t t_rnd(void)
{
	t_rng ^= t_rng << 13;
	t_rng ^= t_rng >> 7;
	t_rng ^= t_rng << 17;
	return t_rng;
}

static inline int64_t t_upto(int64_t n)	/* in [0, n) */
{
	return (int64_t)(t_rnd() % (uint64_t)n);
}

static inline int64_t t_pick(int64_t lo, int64_t hi)	/* in [lo, hi] */
{
	return lo + t_upto(hi - lo + 1);
}

static void t_close(void)
{
	if (!t_open)
		return;
	if (t_failed_now)
		t_fail++;
	else
		t_pass++;
	t_open = 0;
}

static void t_case(const char *name)
{
	t_close();
	t_name = name;
	t_failed_now = 0;
	t_open = 1;
}

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		if (!t_failed_now && t_msgs++ < 50) { \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, t_name); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
		t_failed_now = 1; \
	} \
} while (0)

static int t_summary(void)
{
	t_close();
	printf("%d passed, %d failed\n", t_pass, t_fail);
	return t_fail ? 1 : 0;
}

#endif
