/* safetensors.h: Hugging Face checkpoints (formats/import.md, "Weights"):
 * one model.safetensors, or the shards a model.safetensors.index.json
 * maps names to. A file is mapped read-only; its header (an 8-byte
 * little-endian length, then that many bytes of JSON) is checked against
 * the file's size before anything is read: every tensor's dtype known,
 * its shape's elements times the dtype's size its bytes, its bytes inside
 * the data, no two tensors overlapping. */
#ifndef AMP_SAFETENSORS_H
#define AMP_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"

typedef enum { ST_F32, ST_F16, ST_BF16, ST_OTHER } StType;

typedef struct {
	char *name;
	StType type;
	char *dtype;                    /* as the header names it ("BF16") */
	int rank;
	int64_t shape[8];
	const uint8_t *data;            /* inside its file's mapping */
	size_t bytes;
	int file;                       /* which of the checkpoint's files */
} StTensor;

typedef struct {
	char *origin;                   /* the path ckpt_open was given */
	int nfiles;
	char **paths;
	void **maps;
	size_t *sizes;
	StTensor *t;
	int nt;
} Checkpoint;

/* The checkpoint at path: a .safetensors file, a model.safetensors.index.json,
 * or a directory holding either (model.safetensors first). */
int ckpt_open(Checkpoint *c, const char *path, Err *e);
void ckpt_close(Checkpoint *c);
/* The tensor named name, or NULL. */
const StTensor *ckpt_find(const Checkpoint *c, const char *name);
/* Its values as floats (F32, F16 and BF16; exact), in a malloc'd array of
 * its elements in C order; -1 with e naming the tensor for another dtype. */
int ckpt_floats(const Checkpoint *c, const StTensor *t, float **out, Err *e);

#endif
