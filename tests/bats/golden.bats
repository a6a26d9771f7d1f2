#!/usr/bin/env bats
# Golden stage files for the small models (rewrite with `make regen`).

load common

@test "plan of tiny-mlp matches its golden file" {
	amp-plan -o plan.yaml "$MODELS/tiny-mlp.yaml"
	run diff -u "$GOLDEN/tiny-mlp/plan.yaml" plan.yaml
	assert_success
}

@test "composed plan of tiny-mlp matches its golden file" {
	run amp-compose -o composed.yaml "$GOLDEN/tiny-mlp/plan.yaml"
	assert_success
	run diff -u "$GOLDEN/tiny-mlp/composed.yaml" composed.yaml
	assert_success
}

@test "golden plan round-trips byte for byte through the reader and writer" {
	run amp-compose --no-compose -o again.yaml "$GOLDEN/tiny-mlp/plan.yaml"
	assert_success
	run cmp "$GOLDEN/tiny-mlp/plan.yaml" again.yaml
	assert_success
}

@test "expanded, exchange and grouped stages of tiny-mlp match their golden files" {
	amp-expand -o expanded.yaml "$GOLDEN/tiny-mlp/composed.yaml"
	amp-exchange -o exchange.yaml expanded.yaml
	amp-group -o grouped.yaml exchange.yaml
	for f in expanded exchange grouped; do
		run diff -u "$GOLDEN/tiny-mlp/$f.yaml" "$f.yaml"
		assert_success
	done
}
