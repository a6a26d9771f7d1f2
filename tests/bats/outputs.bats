#!/usr/bin/env bats
# An output never overwrites an input: every tool refuses, before it
# writes anything, an output path (-o, --tiles, --trace, --calibrate's
# -o) that names the same file as one it reads or as another output,
# whether spelled the same, another way (./x) or through a link.

load common
bats_require_minimum_version 1.5.0

TINY=$MODELS/tiny-mlp.yaml

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
}

# refused WHAT FILE CMD...: CMD exits 2 naming WHAT, and FILE is unchanged.
refused() {
	local what=$1 file=$2
	shift 2
	sha256sum "$file" > before.sum
	run --separate-stderr "$@"
	assert_failure 2
	[[ $stderr == *"$what"*"is the same file as"*"an output never overwrites"* ]] || fail "$*: $stderr"
	sha256sum -c --quiet before.sum || fail "$*: $file changed"
}

@test "every tool refuses an output that is one of its inputs, by path, by another spelling or by a link" {
	amp-plan -o p.yaml "$TINY"
	amp-compose p.yaml -o c.yaml
	amp-expand c.yaml -o e.yaml
	amp-exchange e.yaml -o x.yaml
	amp-group x.yaml -o g.yaml
	amp-capture g.yaml -o cap.json
	amp-emit --no-model g.yaml -o prog.amp
	cp "$TINY" m.yaml
	ln -s g.yaml link.yaml
	refused "-o 'p.yaml'" p.yaml amp-compose -o p.yaml p.yaml
	refused "-o './c.yaml'" c.yaml amp-expand -o ./c.yaml c.yaml
	refused "-o 'e.yaml'" e.yaml amp-exchange -o e.yaml "$BATS_TEST_TMPDIR/e.yaml"
	refused "-o 'x.yaml'" x.yaml amp-group -o x.yaml x.yaml
	refused "-o 'm.yaml'" m.yaml amp-plan -o m.yaml m.yaml
	refused "-o 'link.yaml'" g.yaml amp-capture -o link.yaml g.yaml
	refused "--tiles 'g.yaml'" g.yaml amp-capture -o c2.json --tiles g.yaml g.yaml
	refused "--trace 'g.yaml'" g.yaml amp-capture -o c2.json --trace g.yaml g.yaml
	refused "-o 'cap.json'" cap.json amp-capture -o cap.json --tiles cap.json g.yaml
	refused "-o 'g.yaml'" g.yaml amp-emit --no-model -o g.yaml g.yaml
	refused "-o 'm.yaml'" m.yaml amp-emit --model m.yaml -o m.yaml g.yaml
	refused "-o 'cap.json'" cap.json amp-compare -o cap.json cap.json cap.json
	refused "-o 'm.yaml'" m.yaml amp-run --calibrate m.yaml -o m.yaml
	[ ! -e c2.json ] || fail "an output was written"
}
