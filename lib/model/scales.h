/* scales: fp8 scale exponents by tensor name (formats/scales.md).
 *
 *   amp-scales: 1
 *   scales: {w_up: -11, x: -2}
 *
 * A name is a model tensor. For an fp8 parameter or input it is that
 * tensor's scale; for an activation that a matmul casts to fp8 (the tensor
 * amp-plan calls `<name>.fp8`) and for the output of a cast op to fp8, it
 * is the scale of the fp8 value. value = decoded x 2^scale. amp-run
 * --calibrate writes this file from the FP32 reference's amax:
 * scale = ceil(log2(amax / 240)), so the largest magnitude lands at most on
 * 240, F143's largest value.
 */
#ifndef AMP_SCALES_H
#define AMP_SCALES_H

#include "base/diag.h"
#include "base/io.h"

typedef struct {
	char **name;
	int *scale;
	int n;
} Scales;

int scales_load(Scales *s, const char *path, Err *e);
int scales_load_input(Scales *s, Input *in, Err *e);     /* takes over in; NULL in: -1 */
int scales_find(const Scales *s, const char *name, int *scale);  /* 1 found */
void scales_add(Scales *s, const char *name, int scale);
/* Every scale of from into s, the larger exponent where both have a name
 * (the range both need: two programs calibrated as one). */
void scales_merge_max(Scales *s, const Scales *from);
int scales_write(const Scales *s, const char *path, Err *e);
void scales_free(Scales *s);
int scale_for_amax(double amax);

#endif
