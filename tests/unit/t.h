/* t.h: the unit-test harness. Each case is t_case(name); its CHECKs decide
 * whether it passed. t_summary prints "N passed, N failed" and returns the
 * exit status. Randomized tests call t_case once per random case. */
#ifndef AMP_T_H
#define AMP_T_H

#include <stdio.h>

static int t_pass, t_fail, t_failed_now, t_open, t_msgs;
static const char *t_name;

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
