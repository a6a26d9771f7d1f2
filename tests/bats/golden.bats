#!/usr/bin/env bats
# Golden stage files for the small models (rewrite with `make regen`):
# tiny-mlp (an MLP block with a pinned grid) and vit-tiny (patchify, a
# 2-layer repeat with attention, a MAP head written as separate ops).

load common

# model NAME: the model file of a golden case.
model() {
	case $1 in
	tiny-mlp) echo "$ROOT/share/models/tiny-mlp.yaml" ;;
	vit-tiny) echo "$ROOT/tests/models/vit-tiny.yaml" ;;
	esac
}

CASES="tiny-mlp vit-tiny"

@test "plans of tiny-mlp and vit-tiny match their golden files" {
	for c in $CASES; do
		amp-plan -o "$c.plan.yaml" "$(model "$c")"
		run diff -u "$GOLDEN/$c/plan.yaml" "$c.plan.yaml"
		assert_success
	done
}

@test "composed plans of tiny-mlp and vit-tiny match their golden files" {
	for c in $CASES; do
		run amp-compose -o "$c.composed.yaml" "$GOLDEN/$c/plan.yaml"
		assert_success
		run diff -u "$GOLDEN/$c/composed.yaml" "$c.composed.yaml"
		assert_success
	done
}

@test "golden plans round-trip byte for byte through the reader and writer, amp-compose's provenance record added" {
	for c in $CASES; do
		run amp-compose --no-compose -o "$c.again.yaml" "$GOLDEN/$c/plan.yaml"
		assert_success
		run grep -c '^- {tool: amp-compose, version: [^,]*, options: --no-compose, files: \[\]}$' "$c.again.yaml"
		assert_output 1
		run cmp "$GOLDEN/$c/plan.yaml" <(grep -v '^- {tool: amp-compose, ' "$c.again.yaml")
		assert_success
	done
}

@test "expanded, exchange and grouped stages of tiny-mlp and vit-tiny match their golden files" {
	for c in $CASES; do
		amp-expand -o "$c.expanded.yaml" "$GOLDEN/$c/composed.yaml"
		amp-exchange -o "$c.exchange.yaml" "$c.expanded.yaml"
		amp-group -o "$c.grouped.yaml" "$c.exchange.yaml"
		for f in expanded exchange grouped; do
			run diff -u "$GOLDEN/$c/$f.yaml" "$c.$f.yaml"
			assert_success
		done
	done
}

@test "the captures of tiny-mlp and vit-tiny match their golden files" {
	for c in $CASES; do
		amp-capture -o "$c.capture.json" "$GOLDEN/$c/grouped.yaml"
		run diff -u "$GOLDEN/$c/capture.json" "$c.capture.json"
		assert_success
	done
}
