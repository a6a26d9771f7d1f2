/* json: a small deterministic JSON writer (capture files).
 *
 * Objects and arrays nest; keys are written in the order given. Numbers
 * are integers (counts of bytes, fragments or cycles), or a ratio of two
 * of them written with exactly three decimals, rounded half up (null when
 * the denominator is 0), or (json_fixed) a real with three decimals;
 * json_null writes null.
 * Containers opened with `inline` set stay on one line, others put one
 * member per line, indented by two spaces per level.
 */
#ifndef AMP_JSON_H
#define AMP_JSON_H

#include <stdint.h>

#include "base/io.h"

typedef struct {
	Output *out;
	int depth;
	int first[64];
	int inl[64];
	int pending;            /* a key was written; its value follows */
	int failed;
	Err err;
} Json;

void json_init(Json *j, Output *out);
void json_key(Json *j, const char *k);          /* before a value in an object */
void json_open(Json *j, char bracket, int inline_);  /* '{' or '[' */
void json_close(Json *j, char bracket);
void json_str(Json *j, const char *s);
void json_int(Json *j, int64_t v);
void json_kint(Json *j, const char *k, int64_t v);
void json_ratio(Json *j, int64_t num, int64_t den);     /* num / den: "2.090", or null */
void json_null(Json *j);
/* A real with exactly three decimals (printf's %.3f, correctly rounded):
 * the trace's microseconds, which are not a ratio of two integers. */
void json_fixed(Json *j, double v);
void json_kratio(Json *j, const char *k, int64_t num, int64_t den);
void json_kstr(Json *j, const char *k, const char *s);
int json_end(Json *j, Err *e);                  /* final newline; -1 if a write failed */

#endif
