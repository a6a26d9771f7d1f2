/* num: strict number parsing and the machine's number formats (docs/machine.md §3).
 *
 * Parsing: a number is the whole string. parse_i64 accepts an optional '-'
 * followed by decimal digits, nothing else: no sign '+', no spaces, no
 * hex, no trailing text ("12x"), no overflow. parse_f64 accepts a finite
 * decimal float (strtod syntax without hex, inf or nan, whole string).
 *
 * fp16 is IEEE binary16 with round-to-nearest-even; overflow rounds to
 * infinity as IEEE does; NaN stays NaN (quiet, 0x7e00).
 *
 * fp8 is F143: 1 sign, 4 exponent, 3 mantissa bits, exponent bias 8.
 * Exponent field 0 is subnormal (m * 2^-10). Every code except 0x80 is
 * finite; the largest magnitude is 240 (0x7f, 0xff). 0x80 is NaN; zero is
 * only 0x00 (-0.0 encodes to 0x00). Rounding is to nearest even; finite
 * values beyond 240 saturate to +-240; NaN and +-infinity encode to 0x80.
 * f32_to_f8s / f8s_to_f32 apply a power-of-two scale exponent:
 * value = decoded * 2^scale.
 */
#ifndef AMP_NUM_H
#define AMP_NUM_H

#include <stdint.h>

int parse_i64(const char *s, int64_t *out);   /* 0 ok, -1 not a number */
int parse_f64(const char *s, double *out);    /* 0 ok, -1 not a number */

uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);
/* h[i] = f32_to_f16(v[i]) for n values: eight at a time with the CPU's
 * F16C conversion (round to nearest even) where it has one, NaN lanes
 * set to the one quiet NaN, so the codes are the same bits either way. */
void f32_to_f16_n(const float *v, int64_t n, uint16_t *h);
/* v[i] = f16_to_f32(h[i]) for n codes, the same bits (F16C where the CPU
 * has it; a NaN code gives the quiet NaN with its sign and no payload). */
void f16_to_f32_n(const uint16_t *h, int64_t n, float *v);

uint8_t f32_to_f8(float x);
float f8_to_f32(uint8_t b);
uint8_t f32_to_f8s(float x, int scale);
/* b[i] = f32_to_f8s(v[i], scale) for n values, the same codes: branch-free
 * and vectorized for scales within +-100, value by value beyond. */
void f32_to_f8s_n(const float *v, int64_t n, int scale, uint8_t *b);
float f8s_to_f32(uint8_t b, int scale);

#define F8_NAN 0x80u
#define F8_MAX 240.0f

#endif
