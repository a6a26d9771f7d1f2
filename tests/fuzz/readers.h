/* readers.h: one entry point per reader of untrusted input, for the
 * libFuzzer harness (tests/fuzz/fuzz.c, `make fuzz`) and for the replay of
 * the corpora under make check (tests/unit/test_fuzz.c).
 *
 * Each takes any bytes, hands them to the reader as a file (the model,
 * machine, scales, program, .npy, sweep spec, config.json and safetensors
 * readers take paths) or as a memory
 * input (the stage readers and amp-compare's capture reader), and frees whatever was read. A reader may
 * refuse the bytes; it must never crash, leak, hang or read out of bounds.
 */
#ifndef AMP_FUZZ_READERS_H
#define AMP_FUZZ_READERS_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stage/stage_io.h"
#include "study/compare.h"
#include "base/io.h"
#include "model/import.h"
#include "model/machine.h"
#include "model/model.h"
#include "base/npy.h"
#include "stage/plan.h"
#include "lower/program.h"
#include "model/scales.h"
#include "study/sweep.h"

/* Writes the bytes as the file path (replacing it) and returns path. */
static const char *fuzz_write(const char *path, const uint8_t *d, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		abort();
	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, d + off, n - off);
		if (w <= 0)
			abort();
		off += (size_t)w;
	}
	close(fd);
	return path;
}

/* The bytes as a file this process owns (rewritten for every input). */
static const char *fuzz_path(const uint8_t *d, size_t n)
{
	static char path[64];
	if (!path[0])
		snprintf(path, sizeof path, "/tmp/amp-fuzz.%ld", (long)getpid());
	return fuzz_write(path, d, n);
}

/* The sweep spec reader opens the model and machine files a spec names,
 * relative to the spec. The spec is written at /tmp/amp-fuzz-sweep.PID/a/b/
 * spec.yaml, beside a link share -> the project's share/, so a seed names
 * ../../share/models/tiny-mlp.yaml as a spec in tests/bad/ does. */
static char fuzz_sweep_dir[64];

static const char *fuzz_sweep_path(const uint8_t *d, size_t n)
{
	static char path[96];
	if (!fuzz_sweep_dir[0]) {
		char p[96];
		snprintf(fuzz_sweep_dir, sizeof fuzz_sweep_dir, "/tmp/amp-fuzz-sweep.%ld", (long)getpid());
		snprintf(p, sizeof p, "%s/share", fuzz_sweep_dir);
		if (mkdir(fuzz_sweep_dir, 0700) && errno != EEXIST)
			abort();
		unlink(p);
		if (symlink(AMP_SHARE_DIR, p))
			abort();
		snprintf(p, sizeof p, "%s/a", fuzz_sweep_dir);
		mkdir(p, 0700);
		snprintf(p, sizeof p, "%s/a/b", fuzz_sweep_dir);
		mkdir(p, 0700);
		snprintf(path, sizeof path, "%s/a/b/spec.yaml", fuzz_sweep_dir);
	}
	return fuzz_write(path, d, n);
}

static void fuzz_cleanup(void)
{
	char path[128];
	snprintf(path, sizeof path, "/tmp/amp-fuzz.%ld", (long)getpid());
	unlink(path);
	if (fuzz_sweep_dir[0]) {
		const char *const parts[] = { "a/b/spec.yaml", "a/b", "a", "share" };
		for (int i = 0; i < 4; i++) {
			snprintf(path, sizeof path, "%s/%s", fuzz_sweep_dir, parts[i]);
			i == 1 || i == 2 ? rmdir(path) : unlink(path);
		}
		rmdir(fuzz_sweep_dir);
	}
}

static int fuzz_model(const uint8_t *d, size_t n)
{
	Model m;
	Err e;
	if (model_load(&m, fuzz_path(d, n), &e) == 0)
		model_free(&m);
	return 0;
}

static int fuzz_machine(const uint8_t *d, size_t n)
{
	Machine m;
	Err e;
	machine_load(&m, fuzz_path(d, n), &e);
	return 0;
}

static int fuzz_scales(const uint8_t *d, size_t n)
{
	Scales s = { NULL, NULL, 0 };
	Err e;
	scales_load(&s, fuzz_path(d, n), &e);
	scales_free(&s);
	return 0;
}

static int fuzz_stage(const uint8_t *d, size_t n, StageKind k)
{
	Plan pl;
	Err e;
	Input *in = input_open_mem("fuzz", d, n, &e);
	if (in && stage_read_input(&pl, in, k, &e) == 0)
		plan_free(&pl);
	return 0;
}

static int fuzz_plan(const uint8_t *d, size_t n) { return fuzz_stage(d, n, STAGE_PLAN); }
static int fuzz_expand(const uint8_t *d, size_t n) { return fuzz_stage(d, n, STAGE_EXPAND); }
static int fuzz_exchange(const uint8_t *d, size_t n) { return fuzz_stage(d, n, STAGE_EXCHANGE); }
static int fuzz_group(const uint8_t *d, size_t n) { return fuzz_stage(d, n, STAGE_GROUP); }

static int fuzz_program(const uint8_t *d, size_t n)
{
	Program p;
	Plan pl;
	Err e;
	if (program_read(fuzz_path(d, n), &p, &pl, &e) == 0) {
		program_free(&p);
		plan_free(&pl);
	}
	return 0;
}

static int fuzz_npy(const uint8_t *d, size_t n)
{
	Npy a;
	Err e;
	float *f;
	if (npy_read(fuzz_path(d, n), &a, &e) == 0) {
		if (npy_floats(&a, &f, &e) == 0)
			free(f);
		npy_free(&a);
	}
	return 0;
}

static int fuzz_capture(const uint8_t *d, size_t n)
{
	Cap c;
	Err e;
	Input *in = input_open_mem("fuzz", d, n, &e);
	cap_load_input(&c, in, &e);
	cap_free(&c);
	return 0;
}

static int fuzz_sweep(const uint8_t *d, size_t n)
{
	Sweep s;
	Err e;
	sweep_load(&s, fuzz_sweep_path(d, n), &e);
	sweep_free(&s);
	return 0;
}

/* amp-import's configuration reader, and its model writer on what it read. */
static int fuzz_config(const uint8_t *d, size_t n)
{
	HfConfig c;
	Err e;
	if (hf_config_load(&c, fuzz_path(d, n), &e) == 0) {
		char *text = NULL;
		size_t len = 0;
		ImportOpts o = { IMPORT_DECODE, 2, 8, 64, 1, FMT_FP8, FMT_FP8, FMT_FP16, "fuzz", "fuzz" };
		Output *out = output_open_mem(&text, &len, &e);
		if (out && import_model(&c, &o, out, &e) == 0)
			output_commit(out, &e);
		else if (out)
			output_abort(out);
		free(text);
		hf_config_free(&c);
	}
	return 0;
}

/* amp-import's safetensors reader, and the conversion of what it read. */
static int fuzz_safetensors(const uint8_t *d, size_t n)
{
	Checkpoint c;
	Err e;
	if (ckpt_open(&c, fuzz_path(d, n), &e) == 0) {
		for (int i = 0; i < c.nt; i++) {
			float *v;
			if (ckpt_floats(&c, &c.t[i], &v, &e) == 0)
				free(v);
		}
		ckpt_close(&c);
	}
	return 0;
}

typedef int (*FuzzFn)(const uint8_t *d, size_t n);

/* Every reader, by the name of its corpus directory tests/fuzz/<name>/. */
static const struct {
	const char *name;
	FuzzFn fn;
} fuzz_readers[] = {
	{ "model", fuzz_model }, { "machine", fuzz_machine }, { "scales", fuzz_scales },
	{ "plan", fuzz_plan }, { "expand", fuzz_expand }, { "exchange", fuzz_exchange },
	{ "group", fuzz_group }, { "program", fuzz_program }, { "npy", fuzz_npy },
	{ "capture", fuzz_capture }, { "sweep", fuzz_sweep }, { "config", fuzz_config },
	{ "safetensors", fuzz_safetensors },
};
#define FUZZ_READERS ((int)(sizeof fuzz_readers / sizeof *fuzz_readers))

#endif
