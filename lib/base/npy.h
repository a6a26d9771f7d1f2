/* npy: NumPy .npy arrays, read whole and written atomically.
 *
 * Reading accepts format versions 1.0, 2.0 and 3.0 (the header length is
 * 2 bytes in 1.0, 4 bytes after), plain or zstd-compressed (lib/base/io.h), and
 * validates strictly; every error names the file. The header must be a
 * Python dict literal with exactly the keys 'descr', 'fortran_order' and
 * 'shape', in any order: strings in single or double quotes (no escapes),
 * True or False, and a tuple of non-negative decimal integers ("()",
 * "(5,)", "(2, 3)"); spaces and a trailing comma are allowed as in Python,
 * nothing but white space may follow the closing brace. Refused: a descr
 * other than '<f4', '<f2', '|u1' ('<u1' too) or '<f8' (big-endian and
 * native '=' included), fortran_order True, a rank above 8, a negative
 * dimension, a size that overflows, and data that is not exactly
 * count * item size bytes (short or long file).
 *
 * Writing produces format 1.0 byte for byte as NumPy's np.save does (it
 * moves to 2.0 only for a header over 65535 bytes; at rank 8 or less the
 * header is under 512):
 *   "\x93NUMPY" 01 00 <u16 header length>
 *   "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
 * then spaces (NumPy's spare room to grow the first axis, and padding) and
 * "\n", so that the data starts at a multiple of 64 bytes.
 *
 * data holds the values as little-endian bytes exactly as in the file (so
 * on a little-endian host, as amp's are, it is usable as float, uint16_t
 * or double in place), C order, bytes = npy_count * item size; after
 * npy_read it is malloc'd and suitably aligned for any type. Rank 0 is a
 * scalar of one element.
 */
#ifndef AMP_NPY_H
#define AMP_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"

typedef enum { NPY_F32, NPY_F16, NPY_U8, NPY_F64, NPY_I32 } NpyType; /* '<f4', '<f2', '|u1', '<f8', '<i4' */

#define NPY_MAX_RANK 8

typedef struct {
	NpyType type;
	int rank;
	int64_t shape[NPY_MAX_RANK];
	void *data;
	size_t bytes;
} Npy;

/* The whole file (NULL or "-" is standard input); C order only. On error
 * *a is left empty (npy_free is harmless). */
int npy_read(const char *path, Npy *a, Err *e);
/* Atomically through lib/base/io.h (NULL or "-" is standard output); refuses
 * a bad type, rank or shape, or bytes that do not match the shape. */
int npy_write(const char *path, const Npy *a, Err *e);
void npy_free(Npy *a);
int64_t npy_count(const Npy *a); /* product of shape; 1 at rank 0 */
size_t npy_size(NpyType t);      /* bytes per item; 0 for a bad type */
/* The values as a malloc'd float32 array of npy_count elements: f16
 * through f16_to_f32 (lib/base/num.h), f64 by cast; u8 is raw bytes and is
 * refused with an error. */
int npy_floats(const Npy *a, float **out, Err *e);

#endif
