/* import_weights.c: a checkpoint's tensors as the parameters of the model
 * import_model writes (formats/import.md, "Weights"): transposed to
 * [in, out], q's and k's columns permuted within each head to interleaved
 * pairs, k and v side by side per kv head, each layer's stacked; written
 * as DIR/<parameter>.npy (float32, exactly the checkpoint's values) and
 * DIR/weights.yaml, the manifest amp-run --weights checks them against. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/npy.h"
#include "model/import.h"

typedef struct {
	const HfConfig *c;
	const Checkpoint *ck;
	Err *e;
} Src;

static void shape_text(char *buf, size_t n, int rank, const int64_t *shape)
{
	buf[0] = 0;
	for (int i = 0; i < rank && strlen(buf) + 24 < n; i++)
		snprintf(buf + strlen(buf), n - strlen(buf), "%s%lld", i ? ", " : "", (long long)shape[i]);
}

/* The checkpoint's tensor name as floats of exactly the shape want[rank]. */
static float *take_shape(const Src *s, const char *name, int rank, const int64_t *want, Err *e)
{
	const StTensor *t = ckpt_find(s->ck, name);
	float *v;
	if (!t) {
		errf(e, "%s: the checkpoint has no tensor '%s'", s->ck->origin, name);
		return NULL;
	}
	int ok = t->rank == rank;
	for (int i = 0; ok && i < rank; i++)
		ok = t->shape[i] == want[i];
	if (!ok) {
		char got[160], exp[160];
		shape_text(got, sizeof got, t->rank, t->shape);
		shape_text(exp, sizeof exp, rank, want);
		errf(e, "%s: tensor '%s' is [%s]; the configuration makes it [%s]", s->ck->paths[t->file], name, got, exp);
		return NULL;
	}
	return ckpt_floats(s->ck, t, &v, e) ? NULL : v;
}

/* The same for [rows, cols], or [rows] when cols is 0. */
static float *take(const Src *s, const char *name, int64_t rows, int64_t cols, Err *e)
{
	int64_t want[2] = { rows, cols };
	return take_shape(s, name, cols ? 2 : 1, want, e);
}

/* Column of the amp tensor that holds a head's column j (D wide): rotary
 * heads take i to 2i and D/2 + i to 2i + 1 (interleaved pairs). */
static int64_t perm(int64_t j, int64_t D, int rotary)
{
	return !rotary ? j : j < D / 2 ? 2 * j : 2 * (j - D / 2) + 1;
}

/* Writes w [out, in] (a Linear's weight) transposed into dst [in, ldd] at
 * columns c0 + perm: heads of D (rotary: permuted). */
static void put_linear(float *dst, int64_t ldd, int64_t c0, const float *w, int64_t out, int64_t in, int64_t D,
		       int rotary)
{
	for (int64_t o = 0; o < out; o++) {
		int64_t col = c0 + o / D * D + perm(o % D, D, rotary);
		for (int64_t k = 0; k < in; k++)
			dst[k * ldd + col] = w[o * in + k];
	}
}

static void put_vector(float *dst, int64_t c0, const float *b, int64_t n, int64_t D, int rotary)
{
	for (int64_t o = 0; o < n; o++)
		dst[c0 + o / D * D + perm(o % D, D, rotary)] = b[o];
}

typedef struct {
	const char *name;
	int64_t rows, cols;             /* one instance: [rows, cols], or [rows] when cols is 0 */
	int stacked;
} Param;

/* Layer i's instance of parameter p into dst. */
static int layer_param(const Src *s, const Param *p, int64_t i, float *dst, Err *e)
{
	const HfConfig *c = s->c;
	int64_t H = c->hidden, D = c->head_dim, Q = c->heads * D, K = c->kv_heads * D, F = c->inter;
	const char *n = p->name;
	char *pre = xasprintf("model.layers.%lld.", (long long)i), *a = NULL, *b = NULL;
	float *x = NULL, *y = NULL;
	int rc = -1;
#define NAME(v, suffix) (free(v), v = xasprintf("%s%s", pre, suffix))
	if (!strcmp(n, "n1") || !strcmp(n, "n2")) {
		NAME(a, n[1] == '1' ? "input_layernorm.weight" : "post_attention_layernorm.weight");
		if ((x = take(s, a, H, 0, e)))
			memcpy(dst, x, (size_t)H * sizeof *dst), rc = 0;
	} else if (!strcmp(n, "wq") || !strcmp(n, "bq")) {
		NAME(a, n[0] == 'w' ? "self_attn.q_proj.weight" : "self_attn.q_proj.bias");
		if ((x = take(s, a, Q, n[0] == 'w' ? H : 0, e)))
			n[0] == 'w' ? put_linear(dst, Q, 0, x, Q, H, D, 1) : put_vector(dst, 0, x, Q, D, 1), rc = 0;
	} else if (!strcmp(n, "wkv") || !strcmp(n, "bkv")) {
		int w = n[0] == 'w';
		NAME(a, w ? "self_attn.k_proj.weight" : "self_attn.k_proj.bias");
		NAME(b, w ? "self_attn.v_proj.weight" : "self_attn.v_proj.bias");
		if ((x = take(s, a, K, w ? H : 0, e)) && (y = take(s, b, K, w ? H : 0, e))) {
			for (int64_t j = 0; j < c->kv_heads; j++) {     /* kv head j: its keys, then its values */
				if (w) {
					put_linear(dst, 2 * K, 2 * j * D, x + j * D * H, D, H, D, 1);
					put_linear(dst, 2 * K, 2 * j * D + D, y + j * D * H, D, H, D, 0);
				} else {
					put_vector(dst, 2 * j * D, x + j * D, D, D, 1);
					put_vector(dst, 2 * j * D + D, y + j * D, D, D, 0);
				}
			}
			rc = 0;
		}
	} else if (!strcmp(n, "wo") || !strcmp(n, "bo")) {
		NAME(a, n[0] == 'w' ? "self_attn.o_proj.weight" : "self_attn.o_proj.bias");
		if ((x = take(s, a, H, n[0] == 'w' ? Q : 0, e)))
			n[0] == 'w' ? put_linear(dst, H, 0, x, H, Q, H, 0) : put_vector(dst, 0, x, H, H, 0), rc = 0;
	} else {                        /* wg, wu [H, F]; wd [F, H] */
		int down = !strcmp(n, "wd");
		NAME(a, !strcmp(n, "wg") ? "mlp.gate_proj.weight" : !strcmp(n, "wu") ? "mlp.up_proj.weight" : "mlp.down_proj.weight");
		if ((x = take(s, a, down ? H : F, down ? F : H, e)))
			put_linear(dst, down ? H : F, 0, x, down ? H : F, down ? F : H, down ? H : F, 0), rc = 0;
	}
#undef NAME
	free(pre), free(a), free(b), free(x), free(y);
	return rc;
}

/* The model's parameters, as import_model names and shapes them. */
static int params(const HfConfig *c, Param *p)
{
	int64_t H = c->hidden, D = c->head_dim, Q = c->heads * D, K = 2 * c->kv_heads * D, F = c->inter, V = c->vocab;
	int n = 0;
	p[n++] = (Param){ "emb", H, V, 0 };
	if (!c->tied)
		p[n++] = (Param){ "wlm", H, V, 0 };
	p[n++] = (Param){ "norm_f", H, 0, 0 };
	p[n++] = (Param){ "n1", H, 0, 1 };
	p[n++] = (Param){ "wq", H, Q, 1 };
	if (c->qkv_bias)
		p[n++] = (Param){ "bq", Q, 0, 1 };
	p[n++] = (Param){ "wkv", H, K, 1 };
	if (c->qkv_bias)
		p[n++] = (Param){ "bkv", K, 0, 1 };
	p[n++] = (Param){ "wo", Q, H, 1 };
	if (c->o_bias)
		p[n++] = (Param){ "bo", H, 0, 1 };
	p[n++] = (Param){ "n2", H, 0, 1 };
	p[n++] = (Param){ "wg", H, F, 1 };
	p[n++] = (Param){ "wu", H, F, 1 };
	p[n++] = (Param){ "wd", F, H, 1 };
	return n;
}

/* A top-level parameter: the table (tied: also lm_head's), an untied
 * lm_head, the final norm. */
static int top_param(const Src *s, const Param *p, float *dst, Err *e)
{
	const HfConfig *c = s->c;
	float *x = NULL;
	if (!strcmp(p->name, "norm_f")) {
		if (!(x = take(s, "model.norm.weight", c->hidden, 0, e)))
			return -1;
		memcpy(dst, x, (size_t)c->hidden * sizeof *dst);
	} else {
		const char *n = !strcmp(p->name, "emb") ? "model.embed_tokens.weight" : "lm_head.weight";
		if (!(x = take(s, n, c->vocab, c->hidden, e)))
			return -1;
		put_linear(dst, c->vocab, 0, x, c->vocab, c->hidden, c->vocab, 0);
	}
	free(x);
	return 0;
}

/* ---- SigLIP's vision tower ---- */

static int vision_params(const HfConfig *c, Param *p)
{
	int64_t C = c->hidden, F = c->inter, N = (c->image / c->patch) * (c->image / c->patch);
	int64_t K = c->channels * c->patch * c->patch;
	int n = 0;
	p[n++] = (Param){ "w_patch", K, C, 0 };
	p[n++] = (Param){ "b_patch", C, 0, 0 };
	p[n++] = (Param){ "pos", N, C, 0 };
	p[n++] = (Param){ "post_g", C, 0, 0 };
	p[n++] = (Param){ "post_b", C, 0, 0 };
	p[n++] = (Param){ "probe", 1, C, 0 };
	p[n++] = (Param){ "map_wq", C, C, 0 };
	p[n++] = (Param){ "map_bq", C, 0, 0 };
	p[n++] = (Param){ "map_wkv", C, 2 * C, 0 };
	p[n++] = (Param){ "map_bkv", 2 * C, 0, 0 };
	p[n++] = (Param){ "map_wo", C, C, 0 };
	p[n++] = (Param){ "map_bo", C, 0, 0 };
	p[n++] = (Param){ "map_g", C, 0, 0 };
	p[n++] = (Param){ "map_b", C, 0, 0 };
	p[n++] = (Param){ "map_w1", C, F, 0 };
	p[n++] = (Param){ "map_b1", F, 0, 0 };
	p[n++] = (Param){ "map_w2", F, C, 0 };
	p[n++] = (Param){ "map_b2", C, 0, 0 };
	p[n++] = (Param){ "ln1_g", C, 0, 1 };
	p[n++] = (Param){ "ln1_b", C, 0, 1 };
	p[n++] = (Param){ "w_qkv", C, 3 * C, 1 };
	p[n++] = (Param){ "b_qkv", 3 * C, 0, 1 };
	p[n++] = (Param){ "w_o", C, C, 1 };
	p[n++] = (Param){ "b_o", C, 0, 1 };
	p[n++] = (Param){ "ln2_g", C, 0, 1 };
	p[n++] = (Param){ "ln2_b", C, 0, 1 };
	p[n++] = (Param){ "w_up", C, F, 1 };
	p[n++] = (Param){ "b_up", F, 0, 1 };
	p[n++] = (Param){ "w_down", F, C, 1 };
	p[n++] = (Param){ "b_down", C, 0, 1 };
	return n;
}

/* Where a SigLIP parameter comes from: the checkpoint's tensor (after
 * "vision_model.", a layer's after "encoder.layers.<i>."), its shape, and
 * rows first .. first + rows of it (a Linear's output features) placed at
 * column c0 of a [.., width] parameter; transposed when it is a Linear's
 * weight (cols > 0). */
typedef struct {
	const char *hf;
	int64_t first, rows, c0, width;        /* width 0: the tensor copied as it is */
} VisionSrc;

static int vision_one(const Src *s, const VisionSrc *v, int64_t layer, int rank, const int64_t *shape, float *dst,
		      Err *e)
{
	char *name = layer < 0 ? xasprintf("vision_model.%s", v->hf)
			       : xasprintf("vision_model.encoder.layers.%lld.%s", (long long)layer, v->hf);
	float *x = take_shape(s, name, rank, shape, e);
	free(name);
	if (!x)
		return -1;
	int64_t in = rank > 1 ? shape[rank - 1] : 0;
	for (int k = 1; k < rank - 1; k++)     /* a convolution's [out, channels, p, p]: each output's K inputs */
		in *= shape[k];
	if (in && v->width)
		put_linear(dst, v->width, v->c0, x + v->first * in, v->rows, in, v->rows, 0);
	else
		memcpy(dst + v->c0, x + v->first, (size_t)v->rows * sizeof *dst);
	free(x);
	return 0;
}

static int vision_param(const Src *s, const Param *p, int64_t layer, float *dst, Err *e)
{
	const HfConfig *c = s->c;
	int64_t C = c->hidden, F = c->inter, N = (c->image / c->patch) * (c->image / c->patch), P = c->patch;
	int64_t conv[4] = { C, c->channels, P, P }, vec_C[1] = { C }, vec_F[1] = { F }, sq[2] = { C, C };
	int64_t up[2] = { F, C }, down[2] = { C, F }, in3[2] = { 3 * C, C }, b3[1] = { 3 * C }, pos[2] = { N, C };
	int64_t probe[3] = { 1, 1, C };
	static const struct {
		const char *param, *hf;
		int shape;              /* index into the shapes below */
		int64_t first, c0;      /* in units of C */
		int64_t width;          /* columns of the parameter, in units of C (0: F) */
	} map[] = {
		{ "w_patch", "embeddings.patch_embedding.weight", 0, 0, 0, 1 },
		{ "b_patch", "embeddings.patch_embedding.bias", 1, 0, 0, 1 },
		{ "pos", "embeddings.position_embedding.weight", 9, 0, 0, 1 },
		{ "post_g", "post_layernorm.weight", 1, 0, 0, 1 },
		{ "post_b", "post_layernorm.bias", 1, 0, 0, 1 },
		{ "probe", "head.probe", 10, 0, 0, 1 },
		{ "map_wq", "head.attention.in_proj_weight", 7, 0, 0, 1 },
		{ "map_bq", "head.attention.in_proj_bias", 8, 0, 0, 1 },
		{ "map_wkv", "head.attention.in_proj_weight", 7, 1, 0, 2 },
		{ "map_bkv", "head.attention.in_proj_bias", 8, 1, 0, 2 },
		{ "map_wo", "head.attention.out_proj.weight", 3, 0, 0, 1 },
		{ "map_bo", "head.attention.out_proj.bias", 1, 0, 0, 1 },
		{ "map_g", "head.layernorm.weight", 1, 0, 0, 1 },
		{ "map_b", "head.layernorm.bias", 1, 0, 0, 1 },
		{ "map_w1", "head.mlp.fc1.weight", 4, 0, 0, 0 },
		{ "map_b1", "head.mlp.fc1.bias", 2, 0, 0, 0 },
		{ "map_w2", "head.mlp.fc2.weight", 5, 0, 0, 1 },
		{ "map_b2", "head.mlp.fc2.bias", 1, 0, 0, 1 },
		{ "ln1_g", "layer_norm1.weight", 1, 0, 0, 1 },
		{ "ln1_b", "layer_norm1.bias", 1, 0, 0, 1 },
		{ "w_qkv", "self_attn.q_proj.weight", 3, 0, 0, 3 },
		{ "w_qkv", "self_attn.k_proj.weight", 3, 0, 1, 3 },
		{ "w_qkv", "self_attn.v_proj.weight", 3, 0, 2, 3 },
		{ "b_qkv", "self_attn.q_proj.bias", 1, 0, 0, 3 },
		{ "b_qkv", "self_attn.k_proj.bias", 1, 0, 1, 3 },
		{ "b_qkv", "self_attn.v_proj.bias", 1, 0, 2, 3 },
		{ "w_o", "self_attn.out_proj.weight", 3, 0, 0, 1 },
		{ "b_o", "self_attn.out_proj.bias", 1, 0, 0, 1 },
		{ "ln2_g", "layer_norm2.weight", 1, 0, 0, 1 },
		{ "ln2_b", "layer_norm2.bias", 1, 0, 0, 1 },
		{ "w_up", "mlp.fc1.weight", 4, 0, 0, 0 },
		{ "b_up", "mlp.fc1.bias", 2, 0, 0, 0 },
		{ "w_down", "mlp.fc2.weight", 5, 0, 0, 1 },
		{ "b_down", "mlp.fc2.bias", 1, 0, 0, 1 },
	};
	const int64_t *shapes[] = { conv, vec_C, vec_F, sq, up, down, NULL, in3, b3, pos, probe };
	static const int ranks[] = { 4, 1, 1, 2, 2, 2, 0, 2, 1, 2, 3 };
	for (size_t k = 0; k < sizeof map / sizeof *map; k++) {
		if (strcmp(map[k].param, p->name))
			continue;
		int sh = map[k].shape, whole = sh == 9 || sh == 10;     /* [N, C] and [1, 1, C]: as they are */
		int64_t rows = sh == 9 ? N * C : sh == 2 || sh == 4 ? F : map[k].width == 2 ? 2 * C : C;
		VisionSrc v = { map[k].hf, map[k].first * C, rows, map[k].c0 * C,
				whole ? 0 : map[k].width ? map[k].width * C : F };
		if (vision_one(s, &v, p->stacked ? layer : -1, ranks[sh], shapes[sh], dst, e))
			return -1;
	}
	return 0;
}

/* A tied configuration whose checkpoint holds an lm_head that is not the
 * table: the file says tied and the weights say otherwise. */
static int tied_check(const Src *s, Err *e)
{
	const StTensor *lm = ckpt_find(s->ck, "lm_head.weight"), *emb = ckpt_find(s->ck, "model.embed_tokens.weight");
	if (!s->c->tied || !lm)
		return 0;
	if (!emb || lm->bytes != emb->bytes || strcmp(lm->dtype, emb->dtype) || memcmp(lm->data, emb->data, lm->bytes))
		return errf(e, "%s: the configuration ties lm_head to the embedding table ('tie_word_embeddings' true), "
			    "but the checkpoint's 'lm_head.weight' differs from 'model.embed_tokens.weight'", s->ck->origin);
	return 0;
}

static int write_param(const char *dir, const Param *p, int64_t layers, const float *v, FILE *man, Err *e)
{
	Npy a;
	int64_t inst = p->rows * (p->cols ? p->cols : 1);
	memset(&a, 0, sizeof a);
	a.type = NPY_F32;
	if (p->stacked)
		a.shape[a.rank++] = layers;
	a.shape[a.rank++] = p->rows;
	if (p->cols)
		a.shape[a.rank++] = p->cols;
	a.data = (void *)v;
	a.bytes = (size_t)(inst * (p->stacked ? layers : 1)) * sizeof *v;
	char *path = xasprintf("%s/%s.npy", dir, p->name);
	int rc = npy_write(path, &a, e);
	char *text = NULL;
	size_t len = 0;
	if (!rc && !(rc = input_slurp(path, &text, &len, e))) {
		fprintf(man, "  - {name: %s, shape: [", p->name);
		for (int i = 0; i < a.rank; i++)
			fprintf(man, "%s%lld", i ? ", " : "", (long long)a.shape[i]);
		fprintf(man, "], dtype: fp32, fnv1a: %016llx}\n", (unsigned long long)fnv1a(text, len));
	}
	free(text);
	free(path);
	return rc;
}

/* On failure, the files this import wrote go, and the directory when it
 * made it: no partial weights. */
static void undo(const char *dir, const Param *p, int n, int made)
{
	for (int k = 0; k < n; k++) {
		char *path = xasprintf("%s/%s.npy", dir, p[k].name);
		unlink(path);
		free(path);
	}
	if (made)
		rmdir(dir);
}

int import_weights(const HfConfig *c, const ImportOpts *o, const Checkpoint *ck, const char *dir, Err *e)
{
	Src s = { c, ck, e };
	Param p[40];
	int np = c->vision ? vision_params(c, p) : params(c, p), rc = c->vision ? 0 : tied_check(&s, e);
	int made = 0, done = 0;
	struct stat st;
	if (!rc && stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
		rc = errf(e, "%s: not a directory", dir);
	else if (!rc && stat(dir, &st) && (made = 1, mkdir(dir, 0777)))
		rc = errf(e, "%s: cannot make the directory", dir), made = 0;
	char *mtext = NULL;
	size_t mlen = 0;
	FILE *man = rc ? NULL : open_memstream(&mtext, &mlen);
	if (man)
		fprintf(man, "amp-weights: 1\nmodel: %s\ntensors:\n", o->name);
	for (int k = 0; !rc && k < np; k++) {
		int64_t inst = p[k].rows * (p[k].cols ? p[k].cols : 1), n = p[k].stacked ? o->layers : 1;
		float *v = xmalloc((size_t)(inst * n) * sizeof *v);
		for (int64_t i = 0; !rc && i < n; i++)
			rc = c->vision ? vision_param(&s, &p[k], i, v + i * inst, e)
			     : p[k].stacked ? layer_param(&s, &p[k], i, v + i * inst, e) : top_param(&s, &p[k], v, e);
		rc = rc || write_param(dir, &p[k], o->layers, v, man, e);
		done += !rc;
		free(v);
	}
	if (man)
		fclose(man);
	if (!rc) {
		char *path = xasprintf("%s/weights.yaml", dir);
		Output *out = output_open(path, 0, e);
		if (!out)
			rc = -1;
		else if (output_write(out, mtext, mlen, e))
			output_abort(out), rc = -1;
		else
			rc = output_commit(out, e);
		free(path);
	}
	if (rc)
		undo(dir, p, done, made);
	free(mtext);
	return rc;
}
