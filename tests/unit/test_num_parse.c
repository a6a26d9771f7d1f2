/* test_num_parse: lib/num's whole-number and real-number parsers on
 * accepted and refused text. */
#include "base/num.h"
#include "t.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_parse_i64(void)
{
	static const char *bad[] = { "", "+1", " 1", "1 ", "12x", "0x10",
	    "9223372036854775808", "-9223372036854775809", "-", "1.0", "--1",
	    "1e3", "\t1", "99999999999999999999999" };
	unsigned i;
	int64_t v;

	t_case("parse_i64 accepts decimal integers");
	CHECK(parse_i64("0", &v) == 0 && v == 0, "0");
	CHECK(parse_i64("-5", &v) == 0 && v == -5, "-5");
	CHECK(parse_i64("42", &v) == 0 && v == 42, "42");
	CHECK(parse_i64("007", &v) == 0 && v == 7, "007");
	CHECK(parse_i64("-0", &v) == 0 && v == 0, "-0");
	CHECK(parse_i64("9223372036854775807", &v) == 0 && v == INT64_MAX,
	    "INT64_MAX");
	CHECK(parse_i64("-9223372036854775808", &v) == 0 && v == INT64_MIN,
	    "INT64_MIN");
	t_case("parse_i64 rejects anything else");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(parse_i64(bad[i], &v) == -1, "accepted \"%s\"", bad[i]);
}

static void test_parse_f64(void)
{
	static const char *bad[] = { "", "1e", "inf", "nan", "0x1p3", "1.0x",
	    "1e999", "-1e999", "infinity", "NAN", "-inf", "0x10", " 1", "1 ",
	    ".", "-", "e5", "1e5e5", "--1", "1,5" };
	unsigned i;
	double v;

	t_case("parse_f64 accepts finite decimal floats");
	CHECK(parse_f64("1e-6", &v) == 0 && v == 1e-6, "1e-6");
	CHECK(parse_f64("0.5", &v) == 0 && v == 0.5, "0.5");
	CHECK(parse_f64("-3", &v) == 0 && v == -3, "-3");
	CHECK(parse_f64(".5", &v) == 0 && v == 0.5, ".5");
	CHECK(parse_f64("1E+3", &v) == 0 && v == 1000, "1E+3");
	CHECK(parse_f64("-1.5e-3", &v) == 0 && v == -1.5e-3, "-1.5e-3");
	t_case("parse_f64 rejects anything else");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(parse_f64(bad[i], &v) == -1, "accepted \"%s\"", bad[i]);
}

int main(void)
{
	test_parse_i64();
	test_parse_f64();
	return t_summary();
}
