# Fuzzing every reader of untrusted input with libFuzzer, AddressSanitizer
# and UBSan (clang from Debian; `make fuzz` installs it):
#
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_READERS="model npy"]
#
# Each reader (tests/fuzz/readers.h: model, machine, scales, the four stage
# kinds, program, npy, amp-compare's capture reader, the sweep spec and
# amp-import's config.json and safetensors) runs for FUZZ_SECONDS from its seeds in
# tests/fuzz/<reader>/, growing artifacts/fuzz/<reader>/corpus/. A crash,
# leak, timeout or out-of-memory input is written to artifacts/fuzz/<reader>/
# and the run fails; copy it into tests/fuzz/<reader>/ with the fix, where
# make check replays it (tests/unit/test_fuzz.c). The summary prints each
# reader's executions, CPU seconds, CPU seconds over every run so far (the
# corpus grows across runs) and findings. FUZZ_SECONDS=3600 is the long
# campaign; `make -j2 fuzz` runs two readers at once.

FUZZ_READERS ?= model machine scales plan expand exchange group program npy capture sweep config safetensors
FUZZ_SECONDS ?= 60
FUZZ_PKGS    := clang libclang-rt-dev
FUZZ_OBJ     := build/fuzz
FUZZ_FLAGS   := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
		-fno-sanitize-recover=undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
		-DAMP_SHARE_DIR=\"$(CURDIR)/share\"
FUZZ_LIB_OBJ := $(LIB_SRC:lib/%.c=$(FUZZ_OBJ)/lib/%.o)
# The library's objects are prerequisites of a pattern rule only, which makes
# them intermediate; kept, so one reader's build does not recompile the rest.
.SECONDARY: $(FUZZ_LIB_OBJ)

.PHONY: fuzz fuzz-deps
fuzz-deps:
	@$(call install_missing,$(FUZZ_PKGS))

$(FUZZ_OBJ)/lib/%.o: lib/%.c $(LIB_HDR) | fuzz-deps
	@mkdir -p $(@D)
	@clang $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -Ilib -c $< -o $@

$(FUZZ_OBJ)/fuzz-%: tests/fuzz/fuzz.c tests/fuzz/readers.h $(FUZZ_LIB_OBJ)
	@echo "fuzz: building $@"
	@clang $(FUZZ_FLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) -Ilib -DFUZZ_READER='"$*"' $< \
		$(FUZZ_LIB_OBJ) $(PKG_LIBS) -lm -pthread -o $@

# One reader's run: its executions, CPU seconds (user + system, measured by
# GNU time) and findings in $(FUZZ_ART)/<reader>/result.txt, and the CPU
# seconds appended to cpu-history.txt, so a campaign split over several
# runs adds up. Readers are independent: make -j2 fuzz runs two at once.
FUZZ_ART := artifacts/fuzz
FUZZ_RUNS := $(FUZZ_READERS:%=fuzz-run-%)
.PHONY: $(FUZZ_RUNS)
$(FUZZ_RUNS): fuzz-run-%: $(FUZZ_OBJ)/fuzz-%
	@d=$(FUZZ_ART)/$*; rm -f $$d/crash-* $$d/leak-* $$d/timeout-* $$d/oom-* $$d/result.txt; \
	mkdir -p $$d/corpus; \
	/usr/bin/time -f '%U %S' -o $$d/cpu.txt $(FUZZ_OBJ)/fuzz-$* -max_total_time=$(FUZZ_SECONDS) \
		-timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix=$$d/ \
		$$d/corpus tests/fuzz/$* > $$d/log.txt 2>&1; \
	n=$$(sed -n 's/^stat::number_of_executed_units: *//p' $$d/log.txt | tail -n 1); \
	cpu=$$(awk 'NF == 2 && $$1 ~ /^[0-9.]+$$/ { printf "%.0f", $$1 + $$2 }' $$d/cpu.txt); \
	found=$$(ls $$d | grep -c -E '^(crash|leak|timeout|oom)-'); \
	echo "$${cpu:-0}" >> $$d/cpu-history.txt; \
	total=$$(awk '{ s += $$1 } END { printf "%.0f", s }' $$d/cpu-history.txt); \
	echo "$* $${n:-?} $${cpu:-?} $$total $$found" > $$d/result.txt

fuzz: fuzz-deps $(FUZZ_RUNS)
	@fail=0; printf '%-9s %12s %8s %10s %6s  %s\n' reader executions cpu-s all-cpu-s found "($(FUZZ_ART)/<reader>/)"; \
	for r in $(FUZZ_READERS); do \
		read -r name n cpu total found < $(FUZZ_ART)/$$r/result.txt || { fail=1; continue; }; \
		printf '%-9s %12s %8s %10s %6s\n' $$r $$n $$cpu $$total $$found; \
		[ "$$found" = 0 ] && [ "$$n" != "?" ] || fail=1; \
	done; \
	[ $$fail = 0 ] || { echo "fuzz: findings or a failed run; see $(FUZZ_ART)/*/log.txt"; exit 1; }

# The long campaign's record, kept in the repository (artifacts/ is not):
#   make fuzz-record   appends each reader's last run (artifacts/fuzz/<reader>/
#                      result.txt) to tests/fuzz/campaigns.tsv with the date
#                      and the commit fuzzed (HEAD, or FUZZ_COMMIT=; a run
#                      made in another clone: FUZZ_ART=its artifacts/fuzz)
#   make fuzz-status   sums campaigns.tsv per reader: runs, executions, CPU
#                      seconds and findings, against the goal of one CPU-hour
FUZZ_LOG := tests/fuzz/campaigns.tsv
.PHONY: fuzz-record fuzz-status
fuzz-record:
	@[ -e $(FUZZ_LOG) ] || printf 'date\tcommit\treader\texecutions\tcpu_s\tfindings\n' > $(FUZZ_LOG)
	@c='$(FUZZ_COMMIT)'; [ -n "$$c" ] || c=$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown); \
	d=$$(date -u +%F); n=0; \
	for r in $(FUZZ_READERS); do \
		f=$(FUZZ_ART)/$$r/result.txt; [ -s $$f ] || continue; \
		read -r name ex cpu total found < $$f; \
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$$d" "$$c" "$$r" "$$ex" "$$cpu" "$$found" >> $(FUZZ_LOG); n=$$((n + 1)); \
	done; echo "fuzz-record: $$n readers appended to $(FUZZ_LOG)"

fuzz-status:
	@awk -F '\t' 'NR > 1 { runs[$$3]++; ex[$$3] += $$4; cpu[$$3] += $$5; found[$$3] += $$6 } \
		END { printf "%-9s %5s %12s %8s %6s  %s\n", "reader", "runs", "executions", "cpu-s", "found", "goal 3600 cpu-s"; \
		n = split("$(FUZZ_READERS)", rs, " "); \
		for (i = 1; i <= n; i++) { r = rs[i]; \
			printf "%-9s %5d %12d %8d %6d  %s\n", r, runs[r], ex[r], cpu[r], found[r], \
				((cpu[r] >= 3600 && !found[r]) ? "met" : "not yet") } }' $(FUZZ_LOG)
