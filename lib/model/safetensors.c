/* safetensors.c: reading Hugging Face checkpoints (safetensors.h). */
#include "model/safetensors.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/num.h"

#define ST_HEADER_MAX 100000000      /* bytes of JSON header the safetensors format allows */

/* The dtypes of the safetensors format, with their sizes. */
static const struct {
	const char *name;
	size_t size;
	StType type;
} dtypes[] = {
	{ "F32", 4, ST_F32 }, { "F16", 2, ST_F16 }, { "BF16", 2, ST_BF16 }, { "F64", 8, ST_OTHER },
	{ "BOOL", 1, ST_OTHER }, { "U8", 1, ST_OTHER }, { "I8", 1, ST_OTHER }, { "I16", 2, ST_OTHER },
	{ "U16", 2, ST_OTHER }, { "I32", 4, ST_OTHER }, { "U32", 4, ST_OTHER }, { "I64", 8, ST_OTHER },
	{ "U64", 8, ST_OTHER }, { "F8_E4M3", 1, ST_OTHER }, { "F8_E5M2", 1, ST_OTHER },
};

static int cmp_begin(const void *a, const void *b)
{
	const StTensor *x = a, *y = b;
	return (x->data > y->data) - (x->data < y->data);
}

/* One tensor's header entry. */
static int entry(Checkpoint *c, int f, const char *name, json_t *v, const uint8_t *data, size_t dlen, Err *e)
{
	const char *path = c->paths[f];
	json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
	if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) ||
	    json_array_size(off) != 2)
		return errf(e, "%s: tensor '%s': expected {dtype, shape, data_offsets: [begin, end]}", path, name);
	size_t k = 0, nd = sizeof dtypes / sizeof *dtypes;
	while (k < nd && strcmp(dtypes[k].name, json_string_value(dt)))
		k++;
	if (k == nd)
		return errf(e, "%s: tensor '%s': dtype '%s' does not exist", path, name, json_string_value(dt));
	if (json_array_size(sh) > 8)
		return errf(e, "%s: tensor '%s': rank %zu (at most 8)", path, name, json_array_size(sh));
	StTensor t;
	memset(&t, 0, sizeof t);
	t.type = dtypes[k].type;
	t.rank = (int)json_array_size(sh);
	t.file = f;
	uint64_t n = 1;
	for (int i = 0; i < t.rank; i++) {
		json_t *d = json_array_get(sh, (size_t)i);
		if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (INT64_C(1) << 40))
			return errf(e, "%s: tensor '%s': shape entry %d is not a size", path, name, i);
		t.shape[i] = json_integer_value(d);
		n *= (uint64_t)t.shape[i];
		if (n > (UINT64_C(1) << 42))
			return errf(e, "%s: tensor '%s': too many elements", path, name);
	}
	json_t *b0 = json_array_get(off, 0), *b1 = json_array_get(off, 1);
	if (!json_is_integer(b0) || !json_is_integer(b1) || json_integer_value(b0) < 0 ||
	    json_integer_value(b1) < json_integer_value(b0))
		return errf(e, "%s: tensor '%s': data_offsets must be [begin, end] with 0 <= begin <= end", path, name);
	uint64_t begin = (uint64_t)json_integer_value(b0), end = (uint64_t)json_integer_value(b1);
	if (end > dlen)
		return errf(e, "%s: tensor '%s': its data ends at byte %llu of the data, which holds %zu", path, name,
			    (unsigned long long)end, dlen);
	if (end - begin != n * dtypes[k].size)
		return errf(e, "%s: tensor '%s': %llu bytes for %llu elements of %s", path, name,
			    (unsigned long long)(end - begin), (unsigned long long)n, dtypes[k].name);
	t.name = xstrdup(name);
	t.dtype = xstrdup(dtypes[k].name);
	t.data = data + begin;
	t.bytes = (size_t)(end - begin);
	c->t = xrealloc(c->t, (size_t)(c->nt + 1) * sizeof *c->t);
	c->t[c->nt++] = t;
	return 0;
}

/* Maps file f and reads its header. */
static int open_file(Checkpoint *c, int f, Err *e)
{
	const char *path = c->paths[f];
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st))
		return fd >= 0 ? (close(fd), errf(e, "%s: cannot read it", path)) : errf(e, "%s: cannot open it", path);
	size_t size = (size_t)st.st_size;
	void *m = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (size && m == MAP_FAILED)
		return errf(e, "%s: cannot map it", path);
	c->maps[f] = m, c->sizes[f] = size;
	if (size < 8)
		return errf(e, "%s: %zu bytes; a safetensors file begins with an 8-byte header length", path, size);
	const uint8_t *p = m;
	uint64_t hl = 0;
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | p[i];
	if (hl > size - 8)
		return errf(e, "%s: its header claims %llu bytes, past the end of the file (%zu bytes)", path,
			    (unsigned long long)hl, size);
	if (hl > ST_HEADER_MAX)         /* the format's own limit */
		return errf(e, "%s: its header claims %llu bytes; the format allows %d", path, (unsigned long long)hl,
			    ST_HEADER_MAX);
	json_error_t je;
	json_t *h = json_loadb((const char *)p + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &je);
	if (!h)
		return errf(e, "%s: header: %s (at byte %d of the header)", path, je.text, je.position);
	int rc = 0, first = c->nt;
	if (!json_is_object(h))
		rc = errf(e, "%s: the header is not a JSON object", path);
	const char *name;
	json_t *v;
	json_object_foreach(h, name, v) {
		if (rc || !strcmp(name, "__metadata__"))
			continue;
		rc = entry(c, f, name, v, p + 8 + hl, size - 8 - (size_t)hl, e);
	}
	json_decref(h);
	if (rc)
		return -1;
	/* no two tensors of the file share a byte */
	StTensor *s = xmalloc((size_t)(c->nt - first + 1) * sizeof *s);
	memcpy(s, c->t + first, (size_t)(c->nt - first) * sizeof *s);
	qsort(s, (size_t)(c->nt - first), sizeof *s, cmp_begin);
	for (int i = 1; i < c->nt - first && !rc; i++)
		if (s[i].data < s[i - 1].data + s[i - 1].bytes)
			rc = errf(e, "%s: tensors '%s' and '%s' overlap", path, s[i - 1].name, s[i].name);
	free(s);
	return rc;
}

static int add_file(Checkpoint *c, const char *path)
{
	for (int i = 0; i < c->nfiles; i++)
		if (!strcmp(c->paths[i], path))
			return i;
	c->paths = xrealloc(c->paths, (size_t)(c->nfiles + 1) * sizeof *c->paths);
	c->maps = xrealloc(c->maps, (size_t)(c->nfiles + 1) * sizeof *c->maps);
	c->sizes = xrealloc(c->sizes, (size_t)(c->nfiles + 1) * sizeof *c->sizes);
	c->paths[c->nfiles] = xstrdup(path);
	c->maps[c->nfiles] = NULL, c->sizes[c->nfiles] = 0;
	return c->nfiles++;
}

/* A sharded checkpoint: the index's weight_map names each tensor's file,
 * beside the index; every tensor it names must be in that file. */
static int open_index(Checkpoint *c, const char *index, Err *e)
{
	json_error_t je;
	json_t *j = json_load_file(index, JSON_REJECT_DUPLICATES, &je), *wm = j ? json_object_get(j, "weight_map") : NULL;
	if (!j)
		return errf(e, "%s:%d:%d: %s", index, je.line, je.column, je.text);
	if (!json_is_object(wm)) {
		json_decref(j);
		return errf(e, "%s: 'weight_map' is missing", index);
	}
	const char *slash = strrchr(index, '/'), *name;
	int dirlen = slash ? (int)(slash - index) : 1, rc = 0;
	json_t *v;
	json_object_foreach(wm, name, v) {
		if (!json_is_string(v) || strchr(json_string_value(v), '/') || !strcmp(json_string_value(v), "..")) {
			rc = errf(e, "%s: 'weight_map' entry '%s' must name a file beside the index", index, name);
			break;
		}
		char *p = xasprintf("%.*s/%s", dirlen, slash ? index : ".", json_string_value(v));
		add_file(c, p);
		free(p);
	}
	for (int f = 0; !rc && f < c->nfiles; f++)
		rc = open_file(c, f, e);
	json_object_foreach(wm, name, v) {
		const StTensor *t = rc ? NULL : ckpt_find(c, name);
		if (!rc && (!t || strcmp(strrchr(c->paths[t->file], '/') + 1, json_string_value(v))))
			rc = errf(e, "%s: tensor '%s' is not in %s, where 'weight_map' puts it", index, name,
				  json_string_value(v));
	}
	json_decref(j);
	return rc;
}

int ckpt_open(Checkpoint *c, const char *path, Err *e)
{
	struct stat st;
	int rc;
	memset(c, 0, sizeof *c);
	c->origin = xstrdup(path);
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		char *one = xasprintf("%s/model.safetensors", path), *idx = xasprintf("%s/model.safetensors.index.json", path);
		if (stat(one, &st) == 0)
			add_file(c, one), rc = open_file(c, 0, e);
		else if (stat(idx, &st) == 0)
			rc = open_index(c, idx, e);
		else
			rc = errf(e, "%s: holds neither model.safetensors nor model.safetensors.index.json", path);
		free(one), free(idx);
	} else {
		size_t n = strlen(path);
		if (n >= 11 && !strcmp(path + n - 11, ".index.json"))
			rc = open_index(c, path, e);
		else
			add_file(c, path), rc = open_file(c, 0, e);
	}
	if (rc)
		ckpt_close(c);
	return rc;
}

void ckpt_close(Checkpoint *c)
{
	for (int f = 0; f < c->nfiles; f++) {
		if (c->maps[f] && c->sizes[f])
			munmap(c->maps[f], c->sizes[f]);
		free(c->paths[f]);
	}
	for (int i = 0; i < c->nt; i++)
		free(c->t[i].name), free(c->t[i].dtype);
	free(c->paths), free(c->maps), free(c->sizes), free(c->t), free(c->origin);
	memset(c, 0, sizeof *c);
}

const StTensor *ckpt_find(const Checkpoint *c, const char *name)
{
	for (int i = 0; i < c->nt; i++)
		if (!strcmp(c->t[i].name, name))
			return &c->t[i];
	return NULL;
}

int ckpt_floats(const Checkpoint *c, const StTensor *t, float **out, Err *e)
{
	size_t n = t->type == ST_F32 ? t->bytes / 4 : t->bytes / 2;
	if (t->type == ST_OTHER)
		return errf(e, "%s: tensor '%s' is %s; amp-import reads F32, F16 and BF16 weights", c->paths[t->file],
			    t->name, t->dtype);
	float *v = xmalloc((n + 1) * sizeof *v);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = t->data + i * (t->type == ST_F32 ? 4 : 2);
		if (t->type == ST_F32) {
			memcpy(&v[i], p, 4);
		} else {
			uint16_t h = (uint16_t)(p[0] | p[1] << 8);
			if (t->type == ST_F16) {
				v[i] = f16_to_f32(h);
			} else {
				uint32_t b = (uint32_t)h << 16;
				memcpy(&v[i], &b, 4);
			}
		}
	}
	*out = v;
	return 0;
}
