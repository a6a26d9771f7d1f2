#!/usr/bin/env bash
# bench/identical.sh BINDIR OUTDIR [MODEL...]: every output amp makes for
# the shipped models (default: all of share/models), written by the tools
# in BINDIR into OUTDIR, so that two builds can be compared byte for byte
# with `diff -r OUT_A OUT_B` (or cmp). For refactors that must not change
# a single output: build the old tree's bin/, run this on both, diff.
#
# Per model: plan.yaml and plan.txt (--explain), composed.yaml, the
# expanded, exchange and grouped stages, program.amp (--no-model), emit.txt
# (--report), capture.json, tiles.tsv and trace.json. For the small models
# (at most 2 layers) also the validated flow: scales.yaml, the program
# against the model, and amp-run's output (run.txt).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bench/identical.sh BINDIR OUTDIR [MODEL...]" >&2; exit 2; }
bin=$(cd "$1" && pwd); mkdir -p "$2"; out=$(cd "$2" && pwd); shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
models=()
for m in "$@"; do models+=("$(cd "$(dirname "$m")" && pwd)/$(basename "$m")"); done   # before any cd
[ ${#models[@]} -gt 0 ] || models=("$root"/share/models/*.yaml)
machine=$root/share/machines/amp1472.yaml
for m in "${models[@]}"; do
	name=$(basename "$m" .yaml); d=$out/$name; mkdir -p "$d"
	# Relative names from here on: the outputs record their options, and
	# amp-run names its model as given (a copy here, the same in any tree).
	cd "$d"; d=.
	cp "$m" "$name.yaml"; m=$name.yaml
	echo "identical: $name" >&2
	if ! "$bin"/amp-plan --machine "$machine" --explain -o "$d"/plan.yaml "$m" > "$d"/plan.txt 2> "$d"/plan.err; then
		continue
	fi
	"$bin"/amp-compose -o "$d"/composed.yaml "$d"/plan.yaml
	"$bin"/amp-expand -o "$d"/expanded.yaml "$d"/composed.yaml
	"$bin"/amp-exchange -z -o "$d"/exchange.yaml.zst "$d"/expanded.yaml
	"$bin"/amp-group -o "$d"/grouped.yaml "$d"/exchange.yaml.zst
	"$bin"/amp-emit --machine "$machine" --no-model --report -o "$d"/program.amp "$d"/grouped.yaml 2> "$d"/emit.txt || true
	"$bin"/amp-capture --machine "$machine" --tiles "$d"/tiles.tsv --trace "$d"/trace.json \
		-o "$d"/capture.json "$d"/grouped.yaml 2> "$d"/capture.err || true
	case $name in *1layer*|tiny-mlp|siglip-mlp) ;; *) continue ;; esac
	r=run; mkdir -p "$r"
	"$bin"/amp-run --calibrate "$m" -o "$r"/scales.yaml
	"$bin"/amp-plan --machine "$machine" --scales "$r"/scales.yaml "$m" | "$bin"/amp-compose | \
		"$bin"/amp-expand | "$bin"/amp-exchange | "$bin"/amp-group -o "$r"/grouped.yaml
	"$bin"/amp-emit --machine "$machine" --model "$m" --scales "$r"/scales.yaml -o "$r"/program.amp "$r"/grouped.yaml
	"$bin"/amp-run --machine "$machine" --model "$m" --scales "$r"/scales.yaml "$r"/program.amp > "$r"/run.txt 2>&1 || true
done
