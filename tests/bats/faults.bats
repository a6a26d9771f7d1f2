#!/usr/bin/env bats
# The fault catalogue (tests/faults/): one corrupted stage or program per
# kind of fault a lowering or a file can carry, each with its verdict in
# tests/faults/verdicts.tsv. Every kind must be caught, by the tool named
# and with the message given; none may pass silently. The suite prints how
# many kinds it holds and how many were caught.

load common
bats_require_minimum_version 1.5.0

FAULTS=$ROOT/tests/faults

@test "every fault of the catalogue is caught by its tool with its message" {
	local n=0 caught=0 file who re prog
	while IFS=$'\t' read -r file who re; do
		[[ -z $file || $file == \#* ]] && continue
		n=$((n + 1))
		case $who in
		emit)
			run --separate-stderr amp-emit --no-model "$FAULTS/$file" -o out.amp
			[ "$status" = 1 ] && [ ! -e out.amp ] && [[ $stderr =~ ^amp-emit:\ .*$re ]] &&
				caught=$((caught + 1)) || echo "# $file: not caught as '$re' ($status: $stderr)" >&3
			;;
		run | run-model | run-vit | run-prefill)
			prog=$FAULTS/$file
			if [[ $file == *.yaml ]]; then
				run amp-emit --no-model "$FAULTS/$file" -o out.amp
				assert_success
				prog=out.amp
			fi
			local args=()
			[ "$who" = run-model ] && args=(--model "$MODELS/tiny-mlp.yaml")
			[ "$who" = run-vit ] && args=(--model "$ROOT/tests/models/vit-tiny.yaml")
			[ "$who" = run-prefill ] && args=(--model "$ROOT/tests/models/tiny-prefill.yaml")
			run --separate-stderr amp-run "${args[@]}" "$prog"
			# a program without its model is run with amp-run's warning first
			local errs=("${stderr_lines[@]}")
			[[ $who != run || ${errs[0]:-} != "amp-run: warning: '"*"' carries no model "* ]] || errs=("${errs[@]:1}")
			[ "$status" = 1 ] && [ -z "$output" ] && [ "${#errs[@]}" = 1 ] &&
				[[ ${errs[0]} =~ ^amp-run:\ .*$re ]] &&
				caught=$((caught + 1)) || echo "# $file: not caught as '$re' ($status: $stderr)" >&3
			rm -f out.amp
			;;
		plan)
			run --separate-stderr amp-plan "$FAULTS/$file" -o out.yaml
			[ "$status" = 1 ] && [ ! -e out.yaml ] && [[ $stderr =~ ^amp-plan:\ .*$re ]] &&
				caught=$((caught + 1)) || echo "# $file: not caught as '$re' ($status: $stderr)" >&3
			;;
		sweep)
			run --separate-stderr amp-sweep jobs -o sw "$FAULTS/$file"
			[ "$status" = 1 ] && [ ! -e sw ] && [[ $stderr =~ ^amp-sweep:\ .*$re ]] &&
				caught=$((caught + 1)) || echo "# $file: not caught as '$re' ($status: $stderr)" >&3
			;;
		*) fail "verdicts.tsv: unknown catcher '$who' for $file" ;;
		esac
	done < "$FAULTS/verdicts.tsv"
	echo "# fault catalogue: $caught of $n kinds caught" >&3
	assert [ "$n" -ge 9 ]
	assert_equal "$caught" "$n"
	# every file of the catalogue has a verdict
	local files
	files=$(cd "$FAULTS" && ls *.yaml *.amp | wc -l)
	assert_equal "$files" "$n"
}

@test "the wrong scale and the wrong eps pass amp-run without --model: only the model catches them" {
	for f in wrong-scale wrong-eps; do
		run amp-emit --no-model "$FAULTS/$f.yaml" -o $f.amp
		assert_success
		run amp-run $f.amp
		assert_success
	done
}
