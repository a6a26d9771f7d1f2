/* import.h: a Hugging Face model configuration (config.json) as an amp
 * model file (formats/import.md). The configuration is read with
 * jansson; what it describes and amp cannot run is refused by name,
 * never approximated. */
#ifndef AMP_IMPORT_H
#define AMP_IMPORT_H

#include <stdint.h>

#include "base/diag.h"
#include "base/io.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/safetensors.h"

/* The facts of a configuration that its amp model needs. */
typedef struct {
	char *arch;                     /* architectures[0]: LlamaForCausalLM, Qwen2ForCausalLM,
					   SiglipVisionModel (or SiglipModel: its vision_config) */
	int vision;                     /* a SigLIP vision tower (below), else a decoder */
	int64_t hidden, inter, heads, kv_heads, head_dim, layers, vocab;
	double eps, theta;
	RopeScale rope_scale;           /* rope_scaling of rope_type llama3 (factor 0: none) */
	int tied;                       /* tie_word_embeddings: lm_head reads the embedding table */
	int qkv_bias, o_bias;           /* biases on q, k and v (Qwen2, Llama's attention_bias); on o */
	int64_t image, patch, channels; /* SigLIP: image_size, patch_size, num_channels */
} HfConfig;

/* Reads config.json at path (or path/config.json when path is a
 * directory). Errors name the file, and the field or the line and
 * column. */
int hf_config_load(HfConfig *c, const char *path, Err *e);
void hf_config_free(HfConfig *c);

typedef enum { IMPORT_DECODE, IMPORT_PREFILL } ImportKind;

typedef struct {
	ImportKind kind;
	int64_t batch;                  /* sequences */
	int64_t prompt;                 /* a prefill's tokens */
	int64_t context;                /* positions each layer's KV cache holds */
	int64_t layers;                 /* the repeat's count: the config's, or fewer (a copy) */
	Format weights;                 /* the layers' matmul weights */
	Format head;                    /* the embedding table (embed and a tied lm_head) and an untied lm_head */
	Format cache;                   /* the KV cache */
	const char *name;               /* the model's name ([A-Za-z0-9._-]) */
	const char *source;             /* the configuration's base name, for the header comment */
} ImportOpts;

/* Writes the amp model (formats/model.md, format 7) of configuration c
 * under options o: a decoder's decode step or prefill (o->kind), or a
 * vision tower's encoder and MAP head over o->batch images (the kind
 * unused; the cache and the head format unused). */
int import_model(const HfConfig *c, const ImportOpts *o, Output *out, Err *e);

/* Writes the checkpoint ck's tensors as the parameters of the model
 * import_model writes under o: DIR/<parameter>.npy (float32) and the
 * manifest DIR/weights.yaml (formats/import.md, "Weights"). A tensor
 * missing, of another shape or of a dtype other than F32, F16 and BF16 is
 * an error naming it; on an error nothing is left in DIR. */
int import_weights(const HfConfig *c, const ImportOpts *o, const Checkpoint *ck, const char *dir, Err *e);

/* Is s a model name import_model writes as it is: 1 to 128 of
 * [A-Za-z0-9._-]? */
int import_name_ok(const char *s);

#endif
