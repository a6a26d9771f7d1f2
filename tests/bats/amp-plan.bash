# Loaded by the amp-plan suites (amp-plan*.bats), after common: the models
# they plan and their helpers.

TINY=$MODELS/tiny-mlp.yaml
SIGLIP=$MODELS/siglip-mlp.yaml

# rejects FILE LINE:COL MESSAGE [ARG]...: plan_rejects (common.bash).
rejects() {
	plan_rejects "$@"
}
