/* import.c: config.json -> amp model (import.h, formats/import.md). */
#include "model/import.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- reading ---- */

typedef struct {
	json_t *root;
	const char *path;
	Err *e;
} Cfg;

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "a list";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a real";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

/* A positive integer field; absent: *v = dflt, or an error when dflt < 0. */
static int cfg_int(const Cfg *c, const char *key, int64_t dflt, int64_t *v)
{
	json_t *j = json_object_get(c->root, key);
	if (!j || json_is_null(j)) {
		if (dflt < 0)
			return errf(c->e, "%s: '%s' is missing (amp-import needs it)", c->path, key);
		*v = dflt;
		return 0;
	}
	if (!json_is_integer(j))
		return errf(c->e, "%s: '%s' must be an integer, not %s", c->path, key, type_name(j));
	*v = (int64_t)json_integer_value(j);
	if (*v < 1 || *v > (INT64_C(1) << 40))
		return errf(c->e, "%s: '%s' is %lld; it must be positive", c->path, key, (long long)*v);
	return 0;
}

/* A positive finite number (an integer is one too); absent: dflt. */
static int cfg_real(const Cfg *c, const char *key, double dflt, double *v)
{
	json_t *j = json_object_get(c->root, key);
	if (!j || json_is_null(j)) {
		*v = dflt;
		return 0;
	}
	if (!json_is_number(j))
		return errf(c->e, "%s: '%s' must be a number, not %s", c->path, key, type_name(j));
	*v = json_number_value(j);
	if (!(*v > 0) || !isfinite(*v))
		return errf(c->e, "%s: '%s' is %g; it must be positive", c->path, key, *v);
	return 0;
}

/* A boolean; absent or null: dflt. */
static int cfg_bool(const Cfg *c, const char *key, int dflt, int *v)
{
	json_t *j = json_object_get(c->root, key);
	if (!j || json_is_null(j)) {
		*v = dflt;
		return 0;
	}
	if (!json_is_boolean(j))
		return errf(c->e, "%s: '%s' must be true or false, not %s", c->path, key, type_name(j));
	*v = json_is_true(j);
	return 0;
}

/* What the configuration describes and amp does not run, by name. */
static int cfg_refuse(const Cfg *c, int llama)
{
	static const char *experts[] = { "num_experts", "num_local_experts", "n_routed_experts" };
	json_t *j = json_object_get(c->root, "hidden_act");
	if (j && (!json_is_string(j) || strcmp(json_string_value(j), "silu")))
		return errf(c->e, "%s: 'hidden_act' %s%s%s is not supported (amp-import reads silu, SwiGLU's)", c->path,
			    json_is_string(j) ? "'" : "", json_is_string(j) ? json_string_value(j) : type_name(j),
			    json_is_string(j) ? "'" : "");
	for (size_t k = 0; k < sizeof experts / sizeof *experts; k++) {
		j = json_object_get(c->root, experts[k]);
		if (j && json_is_integer(j) && json_integer_value(j) > 0)
			return errf(c->e, "%s: a mixture of experts ('%s' %lld) is not supported", c->path, experts[k],
				    (long long)json_integer_value(j));
	}
	int b;
	if (cfg_bool(c, "use_sliding_window", 0, &b))
		return -1;
	if (b)
		return errf(c->e, "%s: a sliding window ('use_sliding_window' true) is not supported", c->path);
	if (cfg_bool(c, "mlp_bias", 0, &b))
		return -1;
	if (b)
		return errf(c->e, "%s: biases on the MLP ('mlp_bias' true) are not supported", c->path);
	if (cfg_bool(c, "rope_interleaved", 0, &b))
		return -1;
	if (b)
		return errf(c->e, "%s: 'rope_interleaved' true is not supported (amp-import reads checkpoints that "
			    "rotate halves)", c->path);
	(void)llama;
	return 0;
}

/* rope_scaling: absent, null or of rope_type "default", none; "llama3",
 * Llama 3's frequency scaling, its four fields needed; any other type is
 * refused by name. */
static int cfg_rope(const Cfg *c, RopeScale *sc)
{
	static const char *keys[] = { "factor", "low_freq_factor", "high_freq_factor",
				      "original_max_position_embeddings" };
	json_t *j = json_object_get(c->root, "rope_scaling");
	memset(sc, 0, sizeof *sc);
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_object(j))
		return errf(c->e, "%s: 'rope_scaling' must be an object or null, not %s", c->path, type_name(j));
	json_t *t = json_object_get(j, "rope_type");
	t = t ? t : json_object_get(j, "type");
	const char *type = t && json_is_string(t) ? json_string_value(t) : NULL;
	if (type && !strcmp(type, "default"))
		return 0;
	if (!type || strcmp(type, "llama3"))
		return errf(c->e, "%s: 'rope_scaling' of type '%s' is not supported (amp's rope reads llama3 scaling "
			    "only)", c->path, type ? type : "?");
	Cfg in = { j, c->path, c->e };
	double *to[4] = { &sc->factor, &sc->low, &sc->high, &sc->original };
	for (int k = 0; k < 4; k++) {
		if (!json_object_get(j, keys[k]) || json_is_null(json_object_get(j, keys[k])))
			return errf(c->e, "%s: 'rope_scaling' of type 'llama3' has no '%s'", c->path, keys[k]);
		if (cfg_real(&in, keys[k], 0, to[k]))
			return -1;
	}
	if (rope_scale_bad(sc, 0) || rope_scale_bad(sc, 2))    /* (low and original: positive, as cfg_real reads) */
		return errf(c->e, "%s: 'rope_scaling' needs a factor of at least 1 (it is %g) and a high_freq_factor "
			    "above its low_freq_factor (%g against %g)", c->path, sc->factor, sc->high, sc->low);
	return 0;
}

/* A SigLIP vision tower: SiglipVisionModel's own fields, or SiglipModel's
 * vision_config (its text tower is not amp's). */
static int cfg_vision(HfConfig *hc, const Cfg *top)
{
	Cfg c = *top;
	if (!strcmp(hc->arch, "SiglipModel")) {
		c.root = json_object_get(top->root, "vision_config");
		if (!json_is_object(c.root))
			return errf(top->e, "%s: 'vision_config' is missing (a SiglipModel's vision tower)", top->path);
	}
	json_t *j = json_object_get(c.root, "hidden_act");
	if (j && (!json_is_string(j) || strcmp(json_string_value(j), "gelu_pytorch_tanh")))
		return errf(c.e, "%s: 'hidden_act' %s is not supported (amp's gelu is the tanh approximation: "
			    "gelu_pytorch_tanh)", c.path, json_is_string(j) ? json_string_value(j) : type_name(j));
	int head;
	if (cfg_bool(&c, "vision_use_head", 1, &head))
		return -1;
	if (!head)
		return errf(c.e, "%s: 'vision_use_head' false: amp's SigLIP ends in its MAP head", c.path);
	if (cfg_int(&c, "hidden_size", -1, &hc->hidden) || cfg_int(&c, "intermediate_size", -1, &hc->inter) ||
	    cfg_int(&c, "num_attention_heads", -1, &hc->heads) || cfg_int(&c, "num_hidden_layers", -1, &hc->layers) ||
	    cfg_int(&c, "image_size", -1, &hc->image) || cfg_int(&c, "patch_size", -1, &hc->patch) ||
	    cfg_int(&c, "num_channels", 3, &hc->channels) || cfg_real(&c, "layer_norm_eps", 1e-6, &hc->eps))
		return -1;
	if (hc->hidden % hc->heads)
		return errf(c.e, "%s: 'hidden_size' %lld is not a multiple of 'num_attention_heads' %lld", c.path,
			    (long long)hc->hidden, (long long)hc->heads);
	if (hc->image < hc->patch)
		return errf(c.e, "%s: 'image_size' %lld is smaller than 'patch_size' %lld", c.path,
			    (long long)hc->image, (long long)hc->patch);
	hc->vision = 1;
	hc->kv_heads = hc->heads, hc->head_dim = hc->hidden / hc->heads;
	return 0;
}

static int cfg_read(HfConfig *hc, const Cfg *c)
{
	json_t *a = json_object_get(c->root, "architectures");
	if (!a || !json_is_array(a) || json_array_size(a) < 1 || !json_is_string(json_array_get(a, 0)))
		return errf(c->e, "%s: 'architectures' is missing or holds no name", c->path);
	if (json_array_size(a) > 1)
		return errf(c->e, "%s: 'architectures' names %zu classes; amp-import reads one", c->path,
			    json_array_size(a));
	const char *arch = json_string_value(json_array_get(a, 0));
	int llama = !strcmp(arch, "LlamaForCausalLM"), qwen = !strcmp(arch, "Qwen2ForCausalLM");
	int siglip = !strcmp(arch, "SiglipVisionModel") || !strcmp(arch, "SiglipModel");
	if (!llama && !qwen && !siglip)
		return errf(c->e, "%s: architecture '%s' is not supported (amp-import reads LlamaForCausalLM, "
			    "Qwen2ForCausalLM, SiglipVisionModel and SiglipModel's vision tower)", c->path, arch);
	hc->arch = xstrdup(arch);
	if (siglip)
		return cfg_vision(hc, c);
	int bias;
	if (cfg_refuse(c, llama) || cfg_int(c, "hidden_size", -1, &hc->hidden) ||
	    cfg_int(c, "intermediate_size", -1, &hc->inter) || cfg_int(c, "num_attention_heads", -1, &hc->heads) ||
	    cfg_int(c, "num_key_value_heads", -1, &hc->kv_heads) || cfg_int(c, "num_hidden_layers", -1, &hc->layers) ||
	    cfg_int(c, "vocab_size", -1, &hc->vocab) || cfg_real(c, "rms_norm_eps", 1e-6, &hc->eps) ||
	    cfg_real(c, "rope_theta", 10000, &hc->theta) || cfg_bool(c, "tie_word_embeddings", 0, &hc->tied) ||
	    cfg_bool(c, "attention_bias", 0, &bias) || cfg_rope(c, &hc->rope_scale))
		return -1;
	if (hc->heads % hc->kv_heads)
		return errf(c->e, "%s: 'num_key_value_heads' %lld does not divide 'num_attention_heads' %lld", c->path,
			    (long long)hc->kv_heads, (long long)hc->heads);
	if (hc->hidden % hc->heads && !json_object_get(c->root, "head_dim"))
		return errf(c->e, "%s: 'hidden_size' %lld is not a multiple of 'num_attention_heads' %lld, and no "
			    "'head_dim' says the heads' width", c->path, (long long)hc->hidden, (long long)hc->heads);
	if (cfg_int(c, "head_dim", hc->hidden / hc->heads, &hc->head_dim))
		return -1;
	if (hc->head_dim % 2)
		return errf(c->e, "%s: the heads' width %lld is odd; rotary pairs need an even one", c->path,
			    (long long)hc->head_dim);
	hc->qkv_bias = qwen || bias;    /* Qwen2 always; Llama with attention_bias, on o too */
	hc->o_bias = llama && bias;
	return 0;
}

int hf_config_load(HfConfig *hc, const char *path, Err *e)
{
	struct stat st;
	char *file = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? xasprintf("%s/config.json", path) : xstrdup(path);
	json_error_t je;
	memset(hc, 0, sizeof *hc);
	json_t *root = json_load_file(file, JSON_REJECT_DUPLICATES, &je);
	int rc;
	if (!root)
		rc = je.line > 0 ? errf(e, "%s:%d:%d: %s", file, je.line, je.column, je.text)
				 : errf(e, "%s: %s", file, je.text);
	else if (!json_is_object(root))
		rc = errf(e, "%s: expected a JSON object, found %s", file, type_name(root));
	else
		rc = cfg_read(hc, &(Cfg){ root, file, e });
	json_decref(root);
	free(file);
	if (rc)
		hf_config_free(hc);
	return rc;
}

void hf_config_free(HfConfig *c)
{
	free(c->arch);
	c->arch = NULL;
}

/* ---- writing ---- */

int import_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 128)
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		      *p == '_' || *p == '-'))
			return 0;
	return 1;
}

/* x in the fewest digits that read back as x: an integer as one, else
 * %g's with its exponent's zeros dropped (1e-06 -> 1e-6). */
static void number(char *buf, size_t n, double x)
{
	if (x == floor(x) && fabs(x) < 1e15) {
		snprintf(buf, n, "%lld", (long long)x);
		return;
	}
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, n, "%.*g", p, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	char *x_ = strchr(buf, 'e');
	if (x_ && (x_[1] == '-' || x_[1] == '+')) {
		char *d = x_ + 2;
		while (d[0] == '0' && d[1])
			memmove(d, d + 1, strlen(d));
		if (x_[1] == '+')
			memmove(x_ + 1, x_ + 2, strlen(x_ + 1));
	}
}

#define PUT(f, ...) (rc = rc || output_printf(out, e, __VA_ARGS__))

/* The header comment: where the model came from and what it is. */
static int header(const HfConfig *c, const ImportOpts *o, Output *out, Err *e)
{
	int rc = 0;
	char eps[32], theta[32];
	number(eps, sizeof eps, c->eps);
	number(theta, sizeof theta, c->theta);
	int64_t D = c->head_dim, kv = 2 * c->kv_heads * D;
	PUT(f, "# Imported by amp-import from %s (%s), %lld of its %lld layers: hidden %lld, MLP %lld,\n",
	    o->source, c->arch, (long long)o->layers, (long long)c->layers, (long long)c->hidden, (long long)c->inter);
	PUT(f, "# %lld heads sharing %lld kv heads of %lld, vocabulary %lld, %s embeddings, RMSNorm eps %s,\n",
	    (long long)c->heads, (long long)c->kv_heads, (long long)D, (long long)c->vocab, c->tied ? "tied" : "untied",
	    eps);
	PUT(f, "# RoPE theta %s%s, %s.\n", theta, c->rope_scale.factor > 0 ? " with Llama 3's frequency scaling" : "",
	    c->o_bias ? "biases on q, k, v and o" : c->qkv_bias ? "biases on q, k and v only" : "no biases");
	if (o->kind == IMPORT_DECODE)
		PUT(f, "# A decode step of one token for each of %lld sequences at its runtime position, appending\n"
		       "# to and attending over each layer's cache; logits over the vocabulary.\n", (long long)o->batch);
	else
		PUT(f, "# The prefill of a %lld-token prompt for each of %lld sequences: each layer's cache written\n"
		       "# at rows 0 to %lld, the prompt attending causally over itself, and the logits of its last\n"
		       "# position.\n", (long long)o->prompt, (long long)o->batch, (long long)(o->prompt - 1));
	PUT(f, "# Weights %s, the embedding table %s; each layer's KV cache a state [%lld, %lld, %lld] %s.\n",
	    fmt_name(o->weights), fmt_name(o->head), (long long)o->batch, (long long)o->context, (long long)kv,
	    fmt_name(o->cache));
	PUT(f, "# Layout (model format 7): each head's rotary pairs interleaved (the checkpoint's q and k\n"
	       "# columns permuted within each head to match), each kv head's keys beside its values.\n");
	return rc;
}

/* A layer: the repeat's state, parameters and ops. */
static int layer(const HfConfig *c, const ImportOpts *o, Output *out, Err *e, const char *eps, const char *rope)
{
	int rc = 0;
	int64_t H = c->hidden, D = c->head_dim, Q = c->heads * D, KV = 2 * c->kv_heads * D, F = c->inter;
	const char *w = fmt_name(o->weights);
	PUT(f, "  - repeat: layers\n    count: %lld\n    in: h0\n    carry: x\n    state:\n", (long long)o->layers);
	PUT(f, "      cache: {shape: [%lld, %lld, %lld], dtype: %s}\n    params:\n", (long long)o->batch,
	    (long long)o->context, (long long)KV, fmt_name(o->cache));
	PUT(f, "      n1: {shape: [%lld], dtype: fp16}\n      wq: {shape: [%lld, %lld], dtype: %s}\n", (long long)H,
	    (long long)H, (long long)Q, w);
	if (c->qkv_bias)
		PUT(f, "      bq: {shape: [%lld], dtype: fp16}\n", (long long)Q);
	PUT(f, "      wkv: {shape: [%lld, %lld], dtype: %s}\n", (long long)H, (long long)KV, w);
	if (c->qkv_bias)
		PUT(f, "      bkv: {shape: [%lld], dtype: fp16}\n", (long long)KV);
	PUT(f, "      wo: {shape: [%lld, %lld], dtype: %s}\n", (long long)Q, (long long)H, w);
	if (c->o_bias)
		PUT(f, "      bo: {shape: [%lld], dtype: fp16}\n", (long long)H);
	PUT(f, "      n2: {shape: [%lld], dtype: fp16}\n      wg: {shape: [%lld, %lld], dtype: %s}\n", (long long)H,
	    (long long)H, (long long)F, w);
	PUT(f, "      wu: {shape: [%lld, %lld], dtype: %s}\n      wd: {shape: [%lld, %lld], dtype: %s}\n", (long long)H,
	    (long long)F, w, (long long)F, (long long)H, w);
	PUT(f, "    ops:\n      - {op: rmsnorm, name: n1, x: x, scale: n1, eps: %s, out: xn}\n", eps);
	PUT(f, "      - {op: matmul, name: q, a: xn, b: wq,%s out: q0}\n", c->qkv_bias ? " bias: bq," : "");
	PUT(f, "      - {op: matmul, name: kv, a: xn, b: wkv,%s out: kv0}\n", c->qkv_bias ? " bias: bkv," : "");
	PUT(f, "      - {op: rope, name: rq, x: q0, positions: pos, heads: %lld, head_dim: %lld, pairs: interleaved, "
	       "theta: %s, out: q}\n", (long long)c->heads, (long long)D, rope);
	PUT(f, "      - {op: rope, name: rk, x: kv0, positions: pos, heads: %lld, head_dim: %lld, head_stride: %lld, "
	       "pairs: interleaved, theta: %s, out: kv}\n", (long long)c->kv_heads, (long long)D, (long long)(2 * D),
	    rope);
	if (o->kind == IMPORT_DECODE) {
		PUT(f, "      - {op: append, name: store, cache: cache, x: kv, positions: pos}\n");
		PUT(f, "      - {op: attention, name: attn, q: q, kv: cache, heads: %lld, kv_heads: %lld, positions: pos, "
		       "kv_order: heads, out: a}\n", (long long)c->heads, (long long)c->kv_heads);
	} else {
		PUT(f, "      - {op: append, name: store, cache: cache, x: kv, positions: pos, first: 0}\n");
		PUT(f, "      - {op: attention, name: attn, q: q, kv: kv, heads: %lld, kv_heads: %lld, causal: true, "
		       "kv_order: heads, out: a}\n", (long long)c->heads, (long long)c->kv_heads);
	}
	PUT(f, "      - {op: matmul, name: o, a: a, b: wo,%s out: ao}\n", c->o_bias ? " bias: bo," : "");
	PUT(f, "      - {op: add, name: r1, a: x, b: ao, out: h}\n");
	PUT(f, "      - {op: rmsnorm, name: n2, x: h, scale: n2, eps: %s, out: hn}\n", eps);
	PUT(f, "      - {op: matmul, name: gate, a: hn, b: wg, out: g}\n      - {op: matmul, name: up, a: hn, b: wu, "
	       "out: u}\n");
	PUT(f, "      - {op: silu, name: act, x: g, out: s}\n      - {op: mul, name: gated, a: s, b: u, out: m}\n");
	PUT(f, "      - {op: matmul, name: down, a: m, b: wd, out: d}\n      - {op: add, name: r2, a: h, b: d, out: y}\n");
	return rc;
}

/* A SigLIP vision tower: patches, the encoder, the MAP head. */
static int vision(const HfConfig *c, const ImportOpts *o, Output *out, Err *e)
{
	int rc = 0;
	char eps[32];
	int64_t C = c->hidden, F = c->inter, P = c->patch, N = (c->image / P) * (c->image / P), K = c->channels * P * P;
	const char *w = fmt_name(o->weights);
	number(eps, sizeof eps, c->eps);
	PUT(f, "# Imported by amp-import from %s (%s), %lld of its %lld layers: %lldx%lld images of %lld channels,\n"
	       "# patch %lld (%lld tokens), width %lld, %lld heads of %lld, MLP %lld (tanh GELU), layernorm eps %s,\n"
	       "# biased linears, fused QKV, MAP head. Batch %lld; GEMM weights %s, attention fp16.\n",
	    o->source, c->arch, (long long)o->layers, (long long)c->layers, (long long)c->image, (long long)c->image,
	    (long long)c->channels, (long long)P, (long long)N, (long long)C, (long long)c->heads,
	    (long long)c->head_dim, (long long)F, eps, (long long)o->batch, w);
	PUT(f, "amp-model: 7\nname: %s\ninputs:\n  image: {shape: [%lld, %lld, %lld, %lld], dtype: fp16}\nparams:\n",
	    o->name, (long long)o->batch, (long long)c->channels, (long long)c->image, (long long)c->image);
	PUT(f, "  w_patch: {shape: [%lld, %lld], dtype: %s}\n  b_patch: {shape: [%lld], dtype: fp16}\n", (long long)K,
	    (long long)C, w, (long long)C);
	PUT(f, "  pos: {shape: [%lld, %lld], dtype: fp16}\n  post_g: {shape: [%lld], dtype: fp16}\n"
	       "  post_b: {shape: [%lld], dtype: fp16}\n  probe: {shape: [1, %lld], dtype: fp16}\n", (long long)N,
	    (long long)C, (long long)C, (long long)C, (long long)C);
	PUT(f, "  map_wq: {shape: [%lld, %lld], dtype: %s}\n  map_bq: {shape: [%lld], dtype: fp16}\n", (long long)C,
	    (long long)C, w, (long long)C);
	PUT(f, "  map_wkv: {shape: [%lld, %lld], dtype: %s}\n  map_bkv: {shape: [%lld], dtype: fp16}\n", (long long)C,
	    (long long)(2 * C), w, (long long)(2 * C));
	PUT(f, "  map_wo: {shape: [%lld, %lld], dtype: %s}\n  map_bo: {shape: [%lld], dtype: fp16}\n", (long long)C,
	    (long long)C, w, (long long)C);
	PUT(f, "  map_g: {shape: [%lld], dtype: fp16}\n  map_b: {shape: [%lld], dtype: fp16}\n", (long long)C,
	    (long long)C);
	PUT(f, "  map_w1: {shape: [%lld, %lld], dtype: %s}\n  map_b1: {shape: [%lld], dtype: fp16}\n", (long long)C,
	    (long long)F, w, (long long)F);
	PUT(f, "  map_w2: {shape: [%lld, %lld], dtype: %s}\n  map_b2: {shape: [%lld], dtype: fp16}\nops:\n",
	    (long long)F, (long long)C, w, (long long)C);
	PUT(f, "  - {op: patchify, name: patchify, x: image, patch: %lld, out: patches}\n"
	       "  - {op: matmul, name: embed, a: patches, b: w_patch, bias: b_patch, out: emb}\n"
	       "  - {op: add, name: pos_add, a: emb, b: pos, out: x0}\n", (long long)P);
	PUT(f, "  - repeat: layers\n    count: %lld\n    in: x0\n    carry: x\n    params:\n", (long long)o->layers);
	PUT(f, "      ln1_g: {shape: [%lld], dtype: fp16}\n      ln1_b: {shape: [%lld], dtype: fp16}\n", (long long)C,
	    (long long)C);
	PUT(f, "      w_qkv: {shape: [%lld, %lld], dtype: %s}\n      b_qkv: {shape: [%lld], dtype: fp16}\n",
	    (long long)C, (long long)(3 * C), w, (long long)(3 * C));
	PUT(f, "      w_o: {shape: [%lld, %lld], dtype: %s}\n      b_o: {shape: [%lld], dtype: fp16}\n", (long long)C,
	    (long long)C, w, (long long)C);
	PUT(f, "      ln2_g: {shape: [%lld], dtype: fp16}\n      ln2_b: {shape: [%lld], dtype: fp16}\n", (long long)C,
	    (long long)C);
	PUT(f, "      w_up: {shape: [%lld, %lld], dtype: %s}\n      b_up: {shape: [%lld], dtype: fp16}\n", (long long)C,
	    (long long)F, w, (long long)F);
	PUT(f, "      w_down: {shape: [%lld, %lld], dtype: %s}\n      b_down: {shape: [%lld], dtype: fp16}\n",
	    (long long)F, (long long)C, w, (long long)C);
	PUT(f, "    ops:\n      - {op: layernorm, name: ln1, x: x, scale: ln1_g, bias: ln1_b, eps: %s, out: h1}\n", eps);
	PUT(f, "      - {op: matmul, name: qkv, a: h1, b: w_qkv, bias: b_qkv, out: qkv_out}\n"
	       "      - {op: attention, name: attn, qkv: qkv_out, heads: %lld, out: att}\n", (long long)c->heads);
	PUT(f, "      - {op: matmul, name: proj, a: att, b: w_o, bias: b_o, out: proj_out}\n"
	       "      - {op: add, name: res1, a: x, b: proj_out, out: r1}\n");
	PUT(f, "      - {op: layernorm, name: ln2, x: r1, scale: ln2_g, bias: ln2_b, eps: %s, out: h2}\n", eps);
	PUT(f, "      - {op: matmul, name: mlp_up, a: h2, b: w_up, bias: b_up, out: up}\n"
	       "      - {op: gelu, name: act, x: up, out: gl}\n"
	       "      - {op: matmul, name: mlp_down, a: gl, b: w_down, bias: b_down, out: down}\n"
	       "      - {op: add, name: res2, a: r1, b: down, out: r2}\n");
	PUT(f, "  - {op: layernorm, name: post_ln, x: x, scale: post_g, bias: post_b, eps: %s, out: enc}\n", eps);
	PUT(f, "  - {op: map, name: head, x: enc, probe: probe, heads: %lld,\n"
	       "     wq: map_wq, bq: map_bq, wkv: map_wkv, bkv: map_bkv, wo: map_wo, bo: map_bo,\n"
	       "     scale: map_g, bias: map_b, eps: %s, w1: map_w1, b1: map_b1, w2: map_w2, b2: map_b2, out: pooled}\n"
	       "outputs: [pooled]\n", (long long)c->heads, eps);
	return rc ? -1 : 0;
}

int import_model(const HfConfig *c, const ImportOpts *o, Output *out, Err *e)
{
	int rc = 0;
	char eps[32], theta[32];
	int64_t T = o->kind == IMPORT_DECODE ? 1 : o->prompt, H = c->hidden, V = c->vocab;
	if (!import_name_ok(o->name))
		return errf(e, "model name '%s': a name is 1 to 128 of A-Z, a-z, 0-9, '.', '_' and '-'", o->name);
	if (o->layers < 1 || o->layers > c->layers)
		return errf(e, "%lld layers: the configuration has %lld", (long long)o->layers, (long long)c->layers);
	if (c->vision)
		return vision(c, o, out, e);
	if (o->kind == IMPORT_PREFILL && o->prompt > o->context)
		return errf(e, "a prompt of %lld tokens does not fit a cache of %lld positions", (long long)o->prompt,
			    (long long)o->context);
	number(eps, sizeof eps, c->eps);
	number(theta, sizeof theta, c->theta);
	const RopeScale *sc = &c->rope_scale;
	char rope[256];                 /* theta, and Llama 3's scaling (model format 8) */
	if (sc->factor > 0) {
		char n[4][32];
		number(n[0], sizeof n[0], sc->factor), number(n[1], sizeof n[1], sc->low);
		number(n[2], sizeof n[2], sc->high), number(n[3], sizeof n[3], sc->original);
		snprintf(rope, sizeof rope, "%s, scaling: {type: llama3, factor: %s, low_freq_factor: %s, "
			 "high_freq_factor: %s, original_context: %s}", theta, n[0], n[1], n[2], n[3]);
	} else
		snprintf(rope, sizeof rope, "%s", theta);
	rc = header(c, o, out, e);
	PUT(f, "amp-model: %d\nname: %s\ninputs:\n", sc->factor > 0 ? 8 : 7, o->name);
	PUT(f, "  tok: {shape: [%lld, %lld, 1], dtype: int32}\n  pos: {shape: [%lld, %lld, 1], dtype: int32}\n",
	    (long long)o->batch, (long long)T, (long long)o->batch, (long long)T);
	PUT(f, "params:\n  emb: {shape: [%lld, %lld], dtype: %s}\n", (long long)H, (long long)V, fmt_name(o->head));
	if (!c->tied)
		PUT(f, "  wlm: {shape: [%lld, %lld], dtype: %s}\n", (long long)H, (long long)V, fmt_name(o->head));
	PUT(f, "  norm_f: {shape: [%lld], dtype: fp16}\nops:\n", (long long)H);
	PUT(f, "  - {op: embed, name: embed, ids: tok, table: emb, transposed: true, out: h0}\n");
	rc = rc || layer(c, o, out, e, eps, rope);
	if (o->kind == IMPORT_PREFILL)
		PUT(f, "  - {op: last, name: next, x: x, out: xl}\n");
	PUT(f, "  - {op: rmsnorm, name: norm_f, x: %s, scale: norm_f, eps: %s, out: hf}\n",
	    o->kind == IMPORT_PREFILL ? "xl" : "x", eps);
	PUT(f, "  - {op: matmul, name: lm_head, a: hf, b: %s, out: logits}\noutputs: [logits]\n", c->tied ? "emb" : "wlm");
	return rc ? -1 : 0;
}
