# Loaded by every .bats file: the binaries under test on PATH, the Bats
# helper libraries, and a scratch directory per test.
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
: "${AMP_BIN:=$ROOT/bin}"
PATH="$AMP_BIN:$PATH"
MODELS=$ROOT/share/models
MACHINES=$ROOT/share/machines
BAD=$ROOT/tests/bad
GOLDEN=$ROOT/tests/golden

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
}

# siglip-mlp's lowering and capture take seconds, and minutes under
# AddressSanitizer; the sanitizer run (AMP_SAN set) leaves those tests to
# the plain run, which runs them all.
siglip_ok() {
	[ -z "${AMP_SAN:-}" ] || skip "siglip-mlp under the sanitizers: covered by the plain run"
}
