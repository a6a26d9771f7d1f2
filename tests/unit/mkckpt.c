/* mkckpt: tiny Hugging Face checkpoints for the importer's tests, and
 * their logits by an independent float64 forward pass written here from
 * the Hugging Face definitions of LlamaForCausalLM and Qwen2ForCausalLM
 * (rotate_half rotary embedding, grouped-query causal attention, SwiGLU),
 * never from amp's model or code paths.
 *
 *   mkckpt write DIR ARCH [sharded] [bf16] [f16] [untied] [llama3]
 *       DIR/config.json and DIR/model.safetensors (or two shards and
 *       model.safetensors.index.json): hidden 64, MLP 96, 4 heads sharing
 *       2 kv heads of 16, 2 layers, vocabulary 96, random weights (seeded
 *       by ARCH and the options), F32 unless bf16 or f16; with llama3,
 *       Llama 3's rope_scaling (factor 8, low 1, high 4, original 32: of
 *       the 8 frequencies the first kept, the second smoothed, the rest
 *       divided by the factor), which the float64 pass reads back from
 *       DIR/config.json.
 *   mkckpt prompt DIR T
 *       DIR/tok.npy and DIR/pos.npy ([1, T, 1] int32: token ids, 0..T-1),
 *       and DIR/ref_logits.npy ([1, 1, V] float64): the logits of the
 *       prompt's last position by the float64 forward pass over DIR's
 *       checkpoint.
 *   mkckpt write DIR SiglipVisionModel
 *       a SigLIP vision tower: 16x16 images of 3 channels, patch 4 (16
 *       tokens), width 32, 2 heads of 16, MLP 48, 2 layers, MAP head.
 *   mkckpt image DIR
 *       DIR/image.npy ([1, 3, 16, 16], values fp16 holds) and
 *       DIR/ref_pooled.npy ([1, 1, 32] float64): the MAP head's output by
 *       the float64 forward pass (layernorm, attention over all tokens,
 *       tanh GELU; the head's probe attending over the encoder's output).
 *   mkckpt steps DIR TOKEN...
 *       after DIR/tok.npy's prompt, each TOKEN appended in turn (a decode
 *       step's, at the next position): the logits after each,
 *       DIR/ref_step.<k>.npy, by the same float64 pass.
 *   mkckpt cosine A.npy B.npy
 *       prints the cosine of two arrays of one size.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/npy.h"
#include "base/num.h"
#include "model/safetensors.h"

enum { H = 64, F = 96, NH = 4, NKV = 2, D = 16, L = 2, V = 96 };
static const double EPS = 1e-5, THETA = 10000;

static uint64_t rng;
static double uni(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0 * 2 - 1;
}

static void die(const char *what)
{
	fprintf(stderr, "mkckpt: %s\n", what);
	exit(1);
}

/* ---- writing ---- */

typedef struct {
	char *name;
	int rank;
	int64_t shape[4];
	float *v;
} T;

static size_t elems(const T *t)
{
	size_t n = 1;
	for (int k = 0; k < t->rank; k++)
		n *= (size_t)t->shape[k];
	return n;
}

static T ts[64];
static int nts;

static void tensor(const char *name, int64_t r, int64_t c, double scale, double base)
{
	T *t = &ts[nts++];
	t->name = strdup(name);
	t->rank = c ? 2 : 1;
	t->shape[0] = r, t->shape[1] = c;
	int64_t n = r * (c ? c : 1);
	t->v = malloc((size_t)n * sizeof *t->v);
	for (int64_t i = 0; i < n; i++)
		t->v[i] = (float)(base + scale * uni());
}

static void free_tensors(void)
{
	for (int i = 0; i < nts; i++)
		free(ts[i].name), free(ts[i].v);
	nts = 0;
}

static uint16_t bf16(float x)
{
	uint32_t b;
	memcpy(&b, &x, 4);
	b += 0x7FFF + ((b >> 16) & 1);  /* round to nearest even */
	return (uint16_t)(b >> 16);
}

/* Writes tensors [a, b) as one safetensors file. */
static void write_file(const char *path, int a, int b, const char *dtype)
{
	size_t es = strcmp(dtype, "F32") ? 2 : 4, off = 0;
	json_t *h = json_object();
	for (int i = a; i < b; i++) {
		size_t n = elems(&ts[i]);
		json_t *sh = json_array();
		for (int k = 0; k < ts[i].rank; k++)
			json_array_append_new(sh, json_integer(ts[i].shape[k]));
		json_object_set_new(h, ts[i].name, json_pack("{s:s, s:o, s:[I, I]}", "dtype", dtype, "shape", sh,
							     "data_offsets", (json_int_t)off, (json_int_t)(off + n * es)));
		off += n * es;
	}
	json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
	char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	size_t hl = strlen(text), pad = (8 - hl % 8) % 8;
	FILE *f = fopen(path, "wb");
	if (!f)
		die("cannot write the checkpoint");
	uint64_t len = hl + pad;
	for (int k = 0; k < 8; k++)
		fputc((int)(len >> (8 * k) & 255), f);
	fputs(text, f);
	for (size_t k = 0; k < pad; k++)
		fputc(' ', f);
	for (int i = a; i < b; i++) {
		size_t n = elems(&ts[i]);
		for (size_t k = 0; k < n; k++) {
			if (es == 4) {
				fwrite(&ts[i].v[k], 4, 1, f);
			} else {
				uint16_t u = !strcmp(dtype, "BF16") ? bf16(ts[i].v[k]) : f32_to_f16(ts[i].v[k]);
				fputc(u & 255, f), fputc(u >> 8, f);
			}
		}
	}
	fclose(f);
	free(text);
	json_decref(h);
}

static int write_ckpt(const char *dir, const char *arch, int sharded, const char *dtype, int untied, int llama3)
{
	int qwen = !strcmp(arch, "Qwen2ForCausalLM");
	char name[128], path[4096];
	rng = 0x9E3779B97F4A7C15u ^ (uint64_t)(qwen * 7 + sharded * 3 + untied * 5 + (int)strlen(dtype));
	tensor("model.embed_tokens.weight", V, H, 1, 0);
	for (int l = 0; l < L; l++) {
#define LT(s, r, c, sc, b) (snprintf(name, sizeof name, "model.layers.%d.%s", l, s), tensor(name, r, c, sc, b))
		LT("input_layernorm.weight", H, 0, 0.2, 1);
		LT("self_attn.q_proj.weight", NH * D, H, 0.15, 0);
		LT("self_attn.k_proj.weight", NKV * D, H, 0.15, 0);
		LT("self_attn.v_proj.weight", NKV * D, H, 0.15, 0);
		if (qwen) {
			LT("self_attn.q_proj.bias", NH * D, 0, 0.1, 0);
			LT("self_attn.k_proj.bias", NKV * D, 0, 0.1, 0);
			LT("self_attn.v_proj.bias", NKV * D, 0, 0.1, 0);
		}
		LT("self_attn.o_proj.weight", H, NH * D, 0.15, 0);
		LT("post_attention_layernorm.weight", H, 0, 0.2, 1);
		LT("mlp.gate_proj.weight", F, H, 0.15, 0);
		LT("mlp.up_proj.weight", F, H, 0.15, 0);
		LT("mlp.down_proj.weight", H, F, 0.15, 0);
#undef LT
	}
	tensor("model.norm.weight", H, 0, 0.2, 1);
	if (untied)
		tensor("lm_head.weight", V, H, 0.3, 0);
	json_t *cfg = json_pack("{s:[s], s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:b, s:n, s:s}", "architectures",
				arch, "hidden_act", "silu", "hidden_size", (json_int_t)H, "intermediate_size",
				(json_int_t)F, "num_attention_heads", (json_int_t)NH, "num_key_value_heads",
				(json_int_t)NKV, "num_hidden_layers", (json_int_t)L, "vocab_size", (json_int_t)V,
				"rms_norm_eps", EPS, "rope_theta", THETA, "tie_word_embeddings", !untied,
				"rope_scaling", "torch_dtype", !strcmp(dtype, "BF16") ? "bfloat16" : "float32");
	if (llama3)
		json_object_set_new(cfg, "rope_scaling", json_pack("{s:f, s:f, s:f, s:I, s:s}", "factor", 8.0,
								   "low_freq_factor", 1.0, "high_freq_factor", 4.0,
								   "original_max_position_embeddings", (json_int_t)32,
								   "rope_type", "llama3"));
	snprintf(path, sizeof path, "%s/config.json", dir);
	if (json_dump_file(cfg, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
		die("cannot write config.json");
	json_decref(cfg);
	if (!sharded) {
		snprintf(path, sizeof path, "%s/model.safetensors", dir);
		write_file(path, 0, nts, dtype);
		free_tensors();
		return 0;
	}
	int half = nts / 2;
	json_t *wm = json_object();
	for (int i = 0; i < nts; i++)
		json_object_set_new(wm, ts[i].name, json_string(i < half ? "model-00001-of-00002.safetensors"
									  : "model-00002-of-00002.safetensors"));
	json_t *idx = json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)0, "weight_map", wm);
	snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
	json_dump_file(idx, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(idx);
	snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
	write_file(path, 0, half, dtype);
	snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
	write_file(path, half, nts, dtype);
	free_tensors();
	return 0;
}

/* ---- the float64 reference ---- */

static Checkpoint ck;

/* The tensor as doubles (exactly its stored values), or NULL when absent. */
static double *get(const char *name)
{
	const StTensor *t = ckpt_find(&ck, name);
	float *f;
	Err e;
	if (!t)
		return NULL;
	if (ckpt_floats(&ck, t, &f, &e))
		die(e.msg);
	size_t n = t->type == ST_F32 ? t->bytes / 4 : t->bytes / 2;
	double *d = malloc(n * sizeof *d);
	for (size_t i = 0; i < n; i++)
		d[i] = f[i];
	free(f);
	return d;
}

static double *getl(int l, const char *s)
{
	char name[128];
	snprintf(name, sizeof name, "model.layers.%d.%s", l, s);
	return get(name);
}

/* y[n] = x[k] W^T (+ b): W [n, k] as nn.Linear holds it */
#define linear_n linear
static void linear(const double *x, const double *w, const double *b, int n, int k, double *y)
{
	for (int o = 0; o < n; o++) {
		double s = b ? b[o] : 0;
		for (int i = 0; i < k; i++)
			s += x[i] * w[o * k + i];
		y[o] = s;
	}
}

static void rmsnorm(const double *x, const double *w, double *y)
{
	double ss = 0;
	for (int i = 0; i < H; i++)
		ss += x[i] * x[i];
	double r = 1 / sqrt(ss / H + EPS);
	for (int i = 0; i < H; i++)
		y[i] = x[i] * r * w[i];
}

/* The rotary inverse frequencies, as transformers' modeling_rope_utils
 * computes them: the default ones, or (DIR/config.json's rope_scaling of
 * rope_type llama3) _compute_llama3_parameters's. */
static double inv_freq[D / 2];

static void load_rope(const char *dir)
{
	char path[4096];
	json_error_t je;
	snprintf(path, sizeof path, "%s/config.json", dir);
	json_t *cfg = json_load_file(path, 0, &je), *rs = cfg ? json_object_get(cfg, "rope_scaling") : NULL;
	if (!cfg)
		die("cannot read config.json");
	for (int i = 0; i < D / 2; i++)
		inv_freq[i] = 1.0 / pow(THETA, (double)(2 * i) / D);
	if (json_is_object(rs)) {
		double factor = json_number_value(json_object_get(rs, "factor"));
		double low = json_number_value(json_object_get(rs, "low_freq_factor"));
		double high = json_number_value(json_object_get(rs, "high_freq_factor"));
		double old = json_number_value(json_object_get(rs, "original_max_position_embeddings"));
		double low_wavelen = old / low, high_wavelen = old / high;
		for (int i = 0; i < D / 2; i++) {
			double wavelen = 2 * 3.141592653589793 / inv_freq[i];
			double llama = wavelen > low_wavelen ? inv_freq[i] / factor : inv_freq[i];
			double smooth = (old / wavelen - low) / (high - low);
			double smoothed = (1 - smooth) * llama / factor + smooth * llama;
			int medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
			inv_freq[i] = medium ? smoothed : llama;
		}
	}
	json_decref(cfg);
}

/* rotate_half on each head of x (n heads of D) at position p */
static void rope(double *x, int n, int p)
{
	for (int h = 0; h < n; h++)
		for (int i = 0; i < D / 2; i++) {
			double th = p * inv_freq[i], c = cos(th), s = sin(th);
			double a = x[h * D + i], b = x[h * D + i + D / 2];
			x[h * D + i] = a * c - b * s;
			x[h * D + i + D / 2] = b * c + a * s;
		}
}

/* The logits of the last of T tokens (positions 0..T-1), by the float64
 * forward pass over the open checkpoint, into logits[V]. */
static void forward(const int32_t *tok, int T, double *logits)
{
	double *emb = get("model.embed_tokens.weight"), *head = get("lm_head.weight");
	double *x = malloc((size_t)T * H * sizeof *x), *hn = malloc(H * sizeof *hn);
	double *q = malloc((size_t)T * NH * D * sizeof *q), *k = malloc((size_t)T * NKV * D * sizeof *k);
	double *v = malloc((size_t)T * NKV * D * sizeof *v), *att = malloc(NH * D * sizeof *att);
	double *o = malloc(H * sizeof *o), *g = malloc(F * sizeof *g), *u = malloc(F * sizeof *u);
	double *sc = malloc((size_t)T * sizeof *sc);
	for (int t = 0; t < T; t++)
		memcpy(x + t * H, emb + tok[t] * H, H * sizeof *x);
	for (int l = 0; l < L; l++) {
		double *n1 = getl(l, "input_layernorm.weight"), *wq = getl(l, "self_attn.q_proj.weight");
		double *wk = getl(l, "self_attn.k_proj.weight"), *wv = getl(l, "self_attn.v_proj.weight");
		double *bq = getl(l, "self_attn.q_proj.bias"), *bk = getl(l, "self_attn.k_proj.bias");
		double *bv = getl(l, "self_attn.v_proj.bias"), *wo = getl(l, "self_attn.o_proj.weight");
		double *n2 = getl(l, "post_attention_layernorm.weight"), *wg = getl(l, "mlp.gate_proj.weight");
		double *wu = getl(l, "mlp.up_proj.weight"), *wd = getl(l, "mlp.down_proj.weight");
		for (int t = 0; t < T; t++) {
			rmsnorm(x + t * H, n1, hn);
			linear(hn, wq, bq, NH * D, H, q + t * NH * D);
			linear(hn, wk, bk, NKV * D, H, k + t * NKV * D);
			linear(hn, wv, bv, NKV * D, H, v + t * NKV * D);
			rope(q + t * NH * D, NH, t);
			rope(k + t * NKV * D, NKV, t);
		}
		for (int t = 0; t < T; t++) {
			for (int h = 0; h < NH; h++) {
				int j = h / (NH / NKV);
				double m = -INFINITY, z = 0;
				for (int s = 0; s <= t; s++) {
					double d = 0;
					for (int i = 0; i < D; i++)
						d += q[t * NH * D + h * D + i] * k[s * NKV * D + j * D + i];
					sc[s] = d / sqrt((double)D);
					m = sc[s] > m ? sc[s] : m;
				}
				for (int s = 0; s <= t; s++)
					sc[s] = exp(sc[s] - m), z += sc[s];
				for (int i = 0; i < D; i++) {
					double acc = 0;
					for (int s = 0; s <= t; s++)
						acc += sc[s] / z * v[s * NKV * D + j * D + i];
					att[h * D + i] = acc;
				}
			}
			linear(att, wo, NULL, H, NH * D, o);
			for (int i = 0; i < H; i++)
				x[t * H + i] += o[i];
			rmsnorm(x + t * H, n2, hn);
			linear(hn, wg, NULL, F, H, g);
			linear(hn, wu, NULL, F, H, u);
			for (int i = 0; i < F; i++)
				g[i] = g[i] / (1 + exp(-g[i])) * u[i];
			linear(g, wd, NULL, H, F, o);
			for (int i = 0; i < H; i++)
				x[t * H + i] += o[i];
		}
		free(n1), free(wq), free(wk), free(wv), free(bq), free(bk), free(bv), free(wo), free(n2), free(wg),
			free(wu), free(wd);
	}
	double *nf = get("model.norm.weight");
	rmsnorm(x + (T - 1) * H, nf, hn);
	linear(hn, head ? head : emb, NULL, V, H, logits);
	free(emb), free(head), free(nf), free(x), free(hn), free(q), free(k), free(v), free(att), free(o), free(g),
		free(u), free(sc);
}

static void write_logits(const char *dir, const char *name, double *logits)
{
	char path[4096];
	Err e;
	Npy r = { NPY_F64, 3, { 1, 1, V }, logits, V * sizeof *logits };
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (npy_write(path, &r, &e))
		die(e.msg);
}

static int prompt(const char *dir, int T)
{
	char path[4096];
	Err e;
	if (ckpt_open(&ck, dir, &e))
		die(e.msg);
	load_rope(dir);
	int32_t *tok = malloc((size_t)T * 4), *pos = malloc((size_t)T * 4);
	rng = 0xD1B54A32D192ED03u;
	for (int t = 0; t < T; t++)
		tok[t] = (int32_t)((uni() + 1) / 2 * V) % V, pos[t] = t;
	Npy a = { NPY_I32, 3, { 1, T, 1 }, tok, (size_t)T * 4 };
	snprintf(path, sizeof path, "%s/tok.npy", dir);
	if (npy_write(path, &a, &e))
		die(e.msg);
	a.data = pos;
	snprintf(path, sizeof path, "%s/pos.npy", dir);
	if (npy_write(path, &a, &e))
		die(e.msg);
	double logits[V];
	forward(tok, T, logits);
	write_logits(dir, "ref_logits.npy", logits);
	ckpt_close(&ck);
	free(tok), free(pos);
	return 0;
}

/* The prompt DIR/tok.npy, then each token of next[n] appended in turn
 * (a decode step's, at the positions after the prompt's): the logits
 * after each, DIR/ref_step.<k>.npy. */
static int steps(const char *dir, char **next, int n)
{
	char path[4096], name[64];
	Err e;
	Npy a;
	float *f;
	snprintf(path, sizeof path, "%s/tok.npy", dir);
	if (ckpt_open(&ck, dir, &e) || npy_read(path, &a, &e) || npy_floats(&a, &f, &e))
		die(e.msg);
	load_rope(dir);
	int T = (int)npy_count(&a);
	int32_t *tok = malloc((size_t)(T + n) * 4);
	for (int t = 0; t < T; t++)
		tok[t] = (int32_t)f[t];
	for (int k = 0; k < n; k++) {
		double logits[V];
		tok[T + k] = atoi(next[k]);
		forward(tok, T + k + 1, logits);
		snprintf(name, sizeof name, "ref_step.%d.npy", k);
		write_logits(dir, name, logits);
	}
	free(tok), free(f);
	npy_free(&a);
	ckpt_close(&ck);
	return 0;
}

static int cosine(const char *a, const char *b)
{
	Npy x, y;
	Err e;
	float *fx, *fy;
	if (npy_read(a, &x, &e) || npy_read(b, &y, &e) || npy_floats(&x, &fx, &e) || npy_floats(&y, &fy, &e))
		die(e.msg);
	if (npy_count(&x) != npy_count(&y))
		die("the arrays differ in size");
	double xy = 0, xx = 0, yy = 0;
	for (int64_t i = 0; i < npy_count(&x); i++)
		xy += (double)fx[i] * fy[i], xx += (double)fx[i] * fx[i], yy += (double)fy[i] * fy[i];
	printf("%.6f\n", xy / sqrt(xx * yy));
	free(fx), free(fy);
	npy_free(&x), npy_free(&y);
	return 0;
}

/* ---- SigLIP ---- */

enum { SC = 32, SF = 48, SNH = 2, SD = 16, SL = 2, SIMG = 16, SP = 4, SCH = 3, SN = (SIMG / SP) * (SIMG / SP) };
static const double SEPS = 1e-6;

static int write_siglip(const char *dir)
{
	char name[160], path[4096];
	rng = 0x5161C0FFEEu;
	snprintf(name, sizeof name, "vision_model.embeddings.patch_embedding.weight");
	T *t = &ts[nts];
	tensor(name, SC, SCH * SP * SP, 0.2, 0);
	t->rank = 4;            /* [C, channels, p, p]: the same values, a convolution's shape */
	t->shape[1] = SCH, t->shape[2] = SP, t->shape[3] = SP;
	tensor("vision_model.embeddings.patch_embedding.bias", SC, 0, 0.1, 0);
	tensor("vision_model.embeddings.position_embedding.weight", SN, SC, 0.5, 0);
	for (int l = 0; l < SL; l++) {
#define ST(s, r, c, sc, b) (snprintf(name, sizeof name, "vision_model.encoder.layers.%d.%s", l, s), tensor(name, r, c, sc, b))
		ST("layer_norm1.weight", SC, 0, 0.2, 1);
		ST("layer_norm1.bias", SC, 0, 0.1, 0);
		ST("self_attn.q_proj.weight", SC, SC, 0.3, 0);
		ST("self_attn.q_proj.bias", SC, 0, 0.1, 0);
		ST("self_attn.k_proj.weight", SC, SC, 0.3, 0);
		ST("self_attn.k_proj.bias", SC, 0, 0.1, 0);
		ST("self_attn.v_proj.weight", SC, SC, 0.3, 0);
		ST("self_attn.v_proj.bias", SC, 0, 0.1, 0);
		ST("self_attn.out_proj.weight", SC, SC, 0.3, 0);
		ST("self_attn.out_proj.bias", SC, 0, 0.1, 0);
		ST("layer_norm2.weight", SC, 0, 0.2, 1);
		ST("layer_norm2.bias", SC, 0, 0.1, 0);
		ST("mlp.fc1.weight", SF, SC, 0.3, 0);
		ST("mlp.fc1.bias", SF, 0, 0.1, 0);
		ST("mlp.fc2.weight", SC, SF, 0.3, 0);
		ST("mlp.fc2.bias", SC, 0, 0.1, 0);
#undef ST
	}
	tensor("vision_model.post_layernorm.weight", SC, 0, 0.2, 1);
	tensor("vision_model.post_layernorm.bias", SC, 0, 0.1, 0);
	t = &ts[nts];
	tensor("vision_model.head.probe", 1, SC, 1, 0);
	t->rank = 3;            /* [1, 1, C] */
	t->shape[1] = 1, t->shape[2] = SC;
	tensor("vision_model.head.attention.in_proj_weight", 3 * SC, SC, 0.3, 0);
	tensor("vision_model.head.attention.in_proj_bias", 3 * SC, 0, 0.1, 0);
	tensor("vision_model.head.attention.out_proj.weight", SC, SC, 0.3, 0);
	tensor("vision_model.head.attention.out_proj.bias", SC, 0, 0.1, 0);
	tensor("vision_model.head.layernorm.weight", SC, 0, 0.2, 1);
	tensor("vision_model.head.layernorm.bias", SC, 0, 0.1, 0);
	tensor("vision_model.head.mlp.fc1.weight", SF, SC, 0.3, 0);
	tensor("vision_model.head.mlp.fc1.bias", SF, 0, 0.1, 0);
	tensor("vision_model.head.mlp.fc2.weight", SC, SF, 0.3, 0);
	tensor("vision_model.head.mlp.fc2.bias", SC, 0, 0.1, 0);
	json_t *cfg = json_pack("{s:[s], s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "architectures",
				"SiglipVisionModel", "hidden_act", "gelu_pytorch_tanh", "hidden_size", (json_int_t)SC,
				"intermediate_size", (json_int_t)SF, "num_attention_heads", (json_int_t)SNH,
				"num_hidden_layers", (json_int_t)SL, "image_size", (json_int_t)SIMG, "patch_size",
				(json_int_t)SP, "num_channels", (json_int_t)SCH, "layer_norm_eps", SEPS);
	snprintf(path, sizeof path, "%s/config.json", dir);
	if (json_dump_file(cfg, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
		die("cannot write config.json");
	json_decref(cfg);
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	write_file(path, 0, nts, "F32");
	free_tensors();
	return 0;
}

static double *getv(const char *s)
{
	char name[256];
	snprintf(name, sizeof name, "vision_model.%s", s);
	double *d = get(name);
	if (!d)
		die(name);
	return d;
}

static void layernorm(const double *x, const double *g, const double *b, double *y)
{
	double m = 0, v = 0;
	for (int i = 0; i < SC; i++)
		m += x[i];
	m /= SC;
	for (int i = 0; i < SC; i++)
		v += (x[i] - m) * (x[i] - m);
	v /= SC;
	for (int i = 0; i < SC; i++)
		y[i] = (x[i] - m) / sqrt(v + SEPS) * g[i] + b[i];
}

static double gelu(double x)
{
	return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));   /* sqrt(2 / pi) */
}

/* Multi-head attention of nq query rows q [nq, SC] over SN rows k, v. */
static void mha(const double *q, int nq, const double *k, const double *v, double *out)
{
	double sc[SN];
	for (int t = 0; t < nq; t++)
		for (int h = 0; h < SNH; h++) {
			double m = -INFINITY, z = 0;
			for (int s = 0; s < SN; s++) {
				double d = 0;
				for (int i = 0; i < SD; i++)
					d += q[t * SC + h * SD + i] * k[s * SC + h * SD + i];
				sc[s] = d / sqrt((double)SD);
				m = sc[s] > m ? sc[s] : m;
			}
			for (int s = 0; s < SN; s++)
				sc[s] = exp(sc[s] - m), z += sc[s];
			for (int i = 0; i < SD; i++) {
				double a = 0;
				for (int s = 0; s < SN; s++)
					a += sc[s] / z * v[s * SC + h * SD + i];
				out[t * SC + h * SD + i] = a;
			}
		}
}

/* The MLP: fc2(gelu(fc1(x))) into y. */
static void mlp(const double *x, const double *w1, const double *b1, const double *w2, const double *b2, double *y)
{
	double u[SF];
	linear_n(x, w1, b1, SF, SC, u);
	for (int i = 0; i < SF; i++)
		u[i] = gelu(u[i]);
	linear_n(u, w2, b2, SC, SF, y);
}

static int image(const char *dir)
{
	char path[4096];
	Err e;
	if (ckpt_open(&ck, dir, &e))
		die(e.msg);
	static float img[SCH * SIMG * SIMG];
	rng = 0xABCDEF12345u;
	for (int i = 0; i < SCH * SIMG * SIMG; i++)
		img[i] = f16_to_f32(f32_to_f16((float)uni()));
	Npy a = { NPY_F32, 4, { 1, SCH, SIMG, SIMG }, img, sizeof img };
	snprintf(path, sizeof path, "%s/image.npy", dir);
	if (npy_write(path, &a, &e))
		die(e.msg);
	static double x[SN * SC], h[SN * SC], q[SN * SC], k[SN * SC], v[SN * SC], att[SN * SC], o[SC];
	double *wp = getv("embeddings.patch_embedding.weight"), *bp = getv("embeddings.patch_embedding.bias");
	double *pos = getv("embeddings.position_embedding.weight");
	for (int pi = 0; pi < SIMG / SP; pi++)
		for (int pj = 0; pj < SIMG / SP; pj++) {
			int n = pi * (SIMG / SP) + pj;
			for (int c = 0; c < SC; c++) {  /* the convolution, stride p */
				double s = bp[c];
				for (int ch = 0; ch < SCH; ch++)
					for (int r = 0; r < SP; r++)
						for (int w = 0; w < SP; w++)
							s += wp[((c * SCH + ch) * SP + r) * SP + w] *
							     img[(ch * SIMG + pi * SP + r) * SIMG + pj * SP + w];
				x[n * SC + c] = s + pos[n * SC + c];
			}
		}
	for (int l = 0; l < SL; l++) {
		char nm[160];
#define LV(s) (snprintf(nm, sizeof nm, "encoder.layers.%d.%s", l, s), getv(nm))
		double *g1 = LV("layer_norm1.weight"), *b1 = LV("layer_norm1.bias");
		double *wq = LV("self_attn.q_proj.weight"), *bq = LV("self_attn.q_proj.bias");
		double *wk = LV("self_attn.k_proj.weight"), *bk = LV("self_attn.k_proj.bias");
		double *wv = LV("self_attn.v_proj.weight"), *bv = LV("self_attn.v_proj.bias");
		double *wo = LV("self_attn.out_proj.weight"), *bo = LV("self_attn.out_proj.bias");
		double *g2 = LV("layer_norm2.weight"), *b2 = LV("layer_norm2.bias");
		double *f1 = LV("mlp.fc1.weight"), *c1 = LV("mlp.fc1.bias"), *f2 = LV("mlp.fc2.weight");
		double *c2 = LV("mlp.fc2.bias");
#undef LV
		for (int t = 0; t < SN; t++) {
			layernorm(x + t * SC, g1, b1, h + t * SC);
			linear_n(h + t * SC, wq, bq, SC, SC, q + t * SC);
			linear_n(h + t * SC, wk, bk, SC, SC, k + t * SC);
			linear_n(h + t * SC, wv, bv, SC, SC, v + t * SC);
		}
		mha(q, SN, k, v, att);
		for (int t = 0; t < SN; t++) {
			linear_n(att + t * SC, wo, bo, SC, SC, o);
			for (int i = 0; i < SC; i++)
				x[t * SC + i] += o[i];
			layernorm(x + t * SC, g2, b2, h + t * SC);
			mlp(h + t * SC, f1, c1, f2, c2, o);
			for (int i = 0; i < SC; i++)
				x[t * SC + i] += o[i];
		}
		free(g1), free(b1), free(wq), free(bq), free(wk), free(bk), free(wv), free(bv), free(wo), free(bo),
			free(g2), free(b2), free(f1), free(c1), free(f2), free(c2);
	}
	double *pg = getv("post_layernorm.weight"), *pb = getv("post_layernorm.bias");
	for (int t = 0; t < SN; t++)
		layernorm(x + t * SC, pg, pb, h + t * SC);      /* the encoder's output */
	double *probe = getv("head.probe"), *win = getv("head.attention.in_proj_weight");
	double *bin = getv("head.attention.in_proj_bias"), *wo = getv("head.attention.out_proj.weight");
	double *bo = getv("head.attention.out_proj.bias"), *lg = getv("head.layernorm.weight");
	double *lb = getv("head.layernorm.bias"), *f1 = getv("head.mlp.fc1.weight"), *c1 = getv("head.mlp.fc1.bias");
	double *f2 = getv("head.mlp.fc2.weight"), *c2 = getv("head.mlp.fc2.bias");
	double pq[SC], pa[SC], ln[SC], m[SC], *pooled = malloc(SC * sizeof *pooled);
	linear_n(probe, win, bin, SC, SC, pq);
	for (int t = 0; t < SN; t++) {
		linear_n(h + t * SC, win + SC * SC, bin + SC, SC, SC, k + t * SC);
		linear_n(h + t * SC, win + 2 * SC * SC, bin + 2 * SC, SC, SC, v + t * SC);
	}
	mha(pq, 1, k, v, pa);
	linear_n(pa, wo, bo, SC, SC, o);
	layernorm(o, lg, lb, ln);
	mlp(ln, f1, c1, f2, c2, m);
	for (int i = 0; i < SC; i++)
		pooled[i] = o[i] + m[i];
	Npy r = { NPY_F64, 3, { 1, 1, SC }, pooled, SC * sizeof *pooled };
	snprintf(path, sizeof path, "%s/ref_pooled.npy", dir);
	if (npy_write(path, &r, &e))
		die(e.msg);
	free(wp), free(bp), free(pos), free(pg), free(pb), free(probe), free(win), free(bin), free(wo), free(bo);
	free(lg), free(lb), free(f1), free(c1), free(f2), free(c2), free(pooled);
	ckpt_close(&ck);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "write") && !strcmp(argv[3], "SiglipVisionModel"))
		return write_siglip(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "image"))
		return image(argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "write")) {
		int sharded = 0, untied = 0, llama3 = 0;
		const char *dtype = "F32";
		for (int i = 4; i < argc; i++) {
			if (!strcmp(argv[i], "sharded"))
				sharded = 1;
			else if (!strcmp(argv[i], "bf16"))
				dtype = "BF16";
			else if (!strcmp(argv[i], "f16"))
				dtype = "F16";
			else if (!strcmp(argv[i], "untied"))
				untied = 1;
			else if (!strcmp(argv[i], "llama3"))
				llama3 = 1;
			else
				die("unknown option");
		}
		return write_ckpt(argv[2], argv[3], sharded, dtype, untied, llama3);
	}
	if (argc == 4 && !strcmp(argv[1], "prompt"))
		return prompt(argv[2], atoi(argv[3]));
	if (argc >= 4 && !strcmp(argv[1], "steps"))
		return steps(argv[2], argv + 3, argc - 3);
	if (argc == 4 && !strcmp(argv[1], "cosine"))
		return cosine(argv[2], argv[3]);
	die("usage: mkckpt write DIR ARCH [sharded] [bf16] [f16] [untied] [llama3] | prompt DIR T | cosine A B");
	return 2;
}
