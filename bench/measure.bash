# Sourced by the bench scripts. measure COMMAND...: runs it $runs times
# (default 5) with its output discarded, and sets best_us (the fastest
# wall time, from $EPOCHREALTIME around /usr/bin/time, whose own clock has
# 10 ms steps) and best_kib (that run's peak RSS, /usr/bin/time -v). Needs
# $tmp; dies naming the command when it fails.
best_us= best_kib=
measure() {
	local t0 t1 us i
	best_us= best_kib=
	for ((i = 0; i < ${runs:-5}; i++)); do
		t0=${EPOCHREALTIME/./}
		if ! /usr/bin/time -v -o "$tmp/time" "$@" > /dev/null; then
			echo "${0##*/}: '$*' failed" >&2; exit 1
		fi
		t1=${EPOCHREALTIME/./}
		us=$((t1 - t0))
		if [ -z "$best_us" ] || [ "$us" -lt "$best_us" ]; then
			best_us=$us
			best_kib=$(awk -F': ' '/Maximum resident set size/{print $2}' "$tmp/time")
		fi
	done
}
