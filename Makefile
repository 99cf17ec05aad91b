# posenc build. `make run` and `make test` are the two commands a fresh Debian machine needs; both
# install missing packages first (make deps, as root: tests/tools/deps.sh is the only place that
# installs anything). `make check` is the inner loop: build, layer check, unit and e2e tests, and no
# package installation. Layers build into build/libposenc.a (core, tensor, plan, cache, store),
# build/posencd (+ http, daemon) and build/posenc (the CLI; plan reads configs with jansson). Only test code is compiled with -Itests.

CC       ?= cc
BUILD    ?= build
OPT      ?= -O2
# -ffp-contract=off: compat=hf and compat=ggml round each operation where PyTorch's or llama.cpp's
# build does (fused only where they fuse, with fmaf); no compiler may fuse the others (GCC's
# -std=c11 does not, clang's default would).
CFLAGS_BASE := -std=c11 -ffp-contract=off -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wno-unused-parameter -g -fno-strict-aliasing -Iinclude -Isrc
PKGS     := libmicrohttpd jansson libuv libpq
CFLAGS   += $(OPT) $(CFLAGS_BASE)
AVX2FLAGS := -mavx2 -mfma -mf16c
AVX512FLAGS := -mavx512f -mavx512dq -mavx512cd -mavx512bw -mavx512vl -mavx2 -mfma -mf16c
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
LIBS_CORE  := -lnettle -lpng -ldeflate -lsleef -lpq -lm
TEST_LIBS  := $(shell pkg-config --libs check 2>/dev/null) -lcurl -pthread

LIB_SRC    := $(wildcard src/core/*.c src/tensor/*.c src/plan/*.c src/cache/*.c src/store/*.c)
DAEMON_SRC := $(wildcard src/http/*.c src/daemon/*.c)
CLI_SRC    := $(wildcard src/cli/*.c)
ASSET_SRC  := $(wildcard src/daemon/*.S)

LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/obj/%.o) $(ASSET_SRC:%.S=$(BUILD)/obj/%.o)
CLI_OBJ    := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
# Daemon objects other than main, linked into tests of the http and daemon layers.
DAEMON_LIB_OBJ := $(filter-out $(BUILD)/obj/src/daemon/main.o,$(DAEMON_OBJ))
# The test build $(BUILD)/posencd-hooks: posencd with the gates of src/http/test_hooks.c compiled
# in (-DPE_TEST_HOOKS, objects in $(BUILD)/obj-hooks), for the tests that hold a job or a write.
HOOKS_SRC  := src/http/test_hooks.c
HOOKS_OBJ  := $(HOOKS_SRC:%.c=$(BUILD)/obj-hooks/%.o)
DAEMON_HOOKS_OBJ := $(filter-out $(HOOKS_SRC:%.c=$(BUILD)/obj/%.o),$(DAEMON_OBJ)) $(HOOKS_OBJ)

UNIT_SRC   := $(wildcard tests/core/test_*.c tests/tensor/test_*.c tests/plan/test_*.c tests/cache/test_*.c tests/store/test_*.c \
	tests/http/test_*.c tests/daemon/test_*.c tests/cli/test_*.c tests/support/test_*.c)
E2E_SRC    := $(wildcard tests/e2e/test_*.c)
UNIT_BIN   := $(UNIT_SRC:%.c=$(BUILD)/%)
E2E_BIN    := $(E2E_SRC:%.c=$(BUILD)/%)
# tests/support: pe_check (check main, ulps), pe_table (a table from a query) for every check
# program; the spawner and the HTTP assertions for e2e and fault tests alike, libcurl for e2e.
TEST_SUPPORT := $(BUILD)/obj/tests/support/pe_check.o $(BUILD)/obj/tests/support/pe_table.o
SPAWN_SUPPORT := $(BUILD)/obj/tests/support/pe_spawn.o $(BUILD)/obj/tests/support/pe_http.o
PG_SUPPORT   := $(BUILD)/obj/tests/support/pe_pg.o
E2E_SUPPORT  := $(BUILD)/obj/tests/support/pe_daemon.o $(PG_SUPPORT) $(SPAWN_SUPPORT)

.PHONY: all deps run test check layers unit e2e fault suites fuzz ops browser asan tsan tsan-suites lint bench bench-inline clean test-exhaustive \
	docs docs-check
.DELETE_ON_ERROR:

all: $(BUILD)/libposenc.a $(BUILD)/posencd $(if $(CLI_SRC),$(BUILD)/posenc)

# Package groups (tests/tools/deps.sh): `make deps` installs all of them; each target that needs
# packages names its groups below (make DEPS="..." deps).
DEPS ?= all
deps:
	@./tests/tools/deps.sh $(DEPS)

# Test code (tests/support objects, test programs) sees tests/ on its include path; src/ does not.
$(BUILD)/obj/tests/%.o: CFLAGS += -Itests
TEST_CFLAGS := -Itests $(shell pkg-config --cflags libpq 2>/dev/null)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) $(if $(findstring _avx2,$<),$(AVX2FLAGS))$(if $(findstring _avx512,$<),$(AVX512FLAGS)) -MMD -MP -c $< -o $@

$(HOOKS_OBJ): $(BUILD)/obj-hooks/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -DPE_TEST_HOOKS -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I. -MMD -MP -c $< -o $@

$(BUILD)/obj/src/daemon/assets.o: config/posenc.json openapi.yaml $(wildcard src/dashboard/*)

$(BUILD)/libposenc.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/posencd: $(DAEMON_OBJ) $(BUILD)/libposenc.a
	$(CC) $(CFLAGS) -o $@ $(DAEMON_OBJ) $(BUILD)/libposenc.a $(PKG_LIBS) $(LIBS_CORE) -pthread

$(BUILD)/posencd-hooks: $(DAEMON_HOOKS_OBJ) $(BUILD)/libposenc.a
	$(CC) $(CFLAGS) -o $@ $(DAEMON_HOOKS_OBJ) $(BUILD)/libposenc.a $(PKG_LIBS) $(LIBS_CORE) -pthread

$(BUILD)/posenc: $(CLI_OBJ) $(BUILD)/libposenc.a
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libposenc.a $(shell pkg-config --libs jansson 2>/dev/null) $(LIBS_CORE)

# Tests: one check program per file. core/tensor/plan/cache/cli tests link the library only; http,
# daemon and e2e tests also link the daemon layers' objects (all but main).
LIB_TEST_BIN := $(filter $(BUILD)/tests/core/% $(BUILD)/tests/tensor/% $(BUILD)/tests/plan/% $(BUILD)/tests/cache/% $(BUILD)/tests/store/% \
	$(BUILD)/tests/cli/% $(BUILD)/tests/exhaustive/%,$(UNIT_BIN) $(BUILD)/tests/exhaustive/test_shortest_all)
SUPPORT_TEST_BIN := $(filter $(BUILD)/tests/support/%,$(UNIT_BIN))
SRV_TEST_BIN := $(filter-out $(LIB_TEST_BIN) $(SUPPORT_TEST_BIN),$(UNIT_BIN) $(E2E_BIN))

$(LIB_TEST_BIN): $(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT) $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) -o $@ $< $(TEST_SUPPORT) $(BUILD)/libposenc.a $(LIBS_CORE) $(TEST_LIBS) \
		$(shell pkg-config --libs jansson 2>/dev/null)

$(SRV_TEST_BIN): $(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT) $(BUILD)/libposenc.a $(DAEMON_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) $(PKG_CFLAGS) -DPE_BUILD_DIR='"$(BUILD)"' -o $@ $< $(TEST_SUPPORT) \
		$(if $(findstring /e2e/,$@),$(E2E_SUPPORT)) $(DAEMON_LIB_OBJ) $(BUILD)/libposenc.a \
		$(PKG_LIBS) $(LIBS_CORE) $(TEST_LIBS)

# The test of tests/support itself (the spawner starts build/posencd: `make unit` builds all first).
$(SUPPORT_TEST_BIN): $(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT) $(SPAWN_SUPPORT) $(PG_SUPPORT) $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) $(PKG_CFLAGS) -o $@ $< $(TEST_SUPPORT) $(SPAWN_SUPPORT) $(PG_SUPPORT) $(BUILD)/libposenc.a \
		$(LIBS_CORE) $(TEST_LIBS) $(shell pkg-config --libs jansson 2>/dev/null)

$(E2E_BIN): $(E2E_SUPPORT)
$(E2E_SUPPORT): CFLAGS += -DPE_BUILD_DIR='"$(BUILD)"'
$(SPAWN_SUPPORT): CFLAGS += $(shell pkg-config --cflags jansson 2>/dev/null)

# Test programs compile in parallel: a sub-make gets -j$(TEST_JOBS) (the CPUs) unless the command
# line gave a -j, whose jobserver it then shares. tests/tools/run-tests.sh runs the programs
# PE_TEST_JOBS at a time (default: the CPUs) and the ones that need the machine alone after them.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
SUBJ = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(TEST_JOBS))

# The inner loop: everything `make test` builds and its fast suites, without installing anything.
check:
	$(MAKE) $(SUBJ) unit-programs e2e-programs
	$(MAKE) layers
	$(MAKE) docs-check
	@$(RUN_TESTS) unit $(UNIT_BIN) e2e: $(E2E_BIN)

# No #include in src/ reaches up a layer (tests/tools/layers.py) and no two object files of src/
# need each other (tests/tools/file_cycles.py, from nm); each check also refuses planted violations.
# posencd carries no test hook (tests/tools/check-no-hooks.sh; posencd-hooks shows it can see one).
layers: all $(BUILD)/posencd-hooks
	@./tests/tools/test_layers.sh
	@./tests/tools/test_file_cycles.sh
	@./tests/tools/file_cycles.py $(BUILD)
	@./tests/tools/check-no-hooks.sh $(BUILD)/posencd $(BUILD)/posencd-hooks

# docs/configuration.md's key table is printed from the daemon's config table (config_doc): `make
# docs` writes it; docs-check fails when the committed page is stale or a relative link in README.md
# or docs/ points nowhere (and first that it catches a planted case of each).
CONFIG_DOC := $(BUILD)/tests/tools/config_doc
$(CONFIG_DOC): tests/tools/config_doc.c $(BUILD)/obj/src/daemon/config.o $(BUILD)/obj/src/daemon/assets.o $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/obj/src/daemon/config.o $(BUILD)/obj/src/daemon/assets.o \
		$(BUILD)/libposenc.a $(shell pkg-config --libs jansson 2>/dev/null) $(LIBS_CORE)

docs: $(CONFIG_DOC)
	@./tests/tools/docs.py write $(CONFIG_DOC)

docs-check: $(CONFIG_DOC)
	@./tests/tools/docs.py check $(CONFIG_DOC)
	@./tests/tools/docs.py self-test $(CONFIG_DOC)

# Each program's time in the last run is kept in $(BUILD)/test-times: the runner starts the longest
# first (tests/tools/test-times holds the figures for a fresh tree).
RUN_TESTS = PE_TEST_TIMES=$(BUILD)/test-times ./tests/tools/run-tests.sh

unit:
	@$(MAKE) $(SUBJ) unit-programs
	@$(RUN_TESTS) unit $(UNIT_BIN)

e2e:
	@$(MAKE) $(SUBJ) e2e-programs
	@$(RUN_TESTS) e2e $(E2E_BIN)

# Fault tests: slowloris, overload, abandoned jobs, SIGTERM under load, big bodies, hostile headers
# and queries, each against its own daemon of this build tree.
FAULT_SRC  := $(wildcard tests/fault/test_*.c)
FAULT_BIN  := $(FAULT_SRC:%.c=$(BUILD)/%)
FUZZ_SECONDS ?= 60

# Each links the fault support library (tests/support/pe_fault.c) and reports through check.
FAULT_SUPPORT := $(BUILD)/obj/tests/support/pe_fault.o $(BUILD)/obj/tests/support/pe_check.o $(SPAWN_SUPPORT)
$(FAULT_BIN): $(BUILD)/tests/fault/%: tests/fault/%.c $(FAULT_SUPPORT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) -o $@ $< $(FAULT_SUPPORT) $(shell pkg-config --libs jansson 2>/dev/null) $(TEST_LIBS)

fault:
	@$(MAKE) $(SUBJ) fault-programs
	@$(RUN_TESTS) fault $(FAULT_BIN)

# unit, e2e and fault programs in one pool: no kind waits for another's slowest program.
SUITES = unit $(UNIT_BIN) e2e: $(E2E_BIN) fault: $(FAULT_BIN)
suites:
	@$(MAKE) $(SUBJ) test-programs
	@$(RUN_TESTS) $(SUITES)

# The test programs of this build tree, compiled (nothing run).
.PHONY: test-programs unit-programs e2e-programs fault-programs
test-programs: unit-programs e2e-programs fault-programs
# The tests that hold a job or a write start $(BUILD)/posencd-hooks (pe_spawn_hooks).
unit-programs: all $(BUILD)/posencd-hooks $(UNIT_BIN)
	@:
e2e-programs: all $(BUILD)/posencd-hooks $(E2E_BIN)
	@:
fault-programs: all $(BUILD)/posencd-hooks $(FAULT_BIN)
	@:

# libFuzzer targets (clang, ASan + UBSan) for every parser, FUZZ_SECONDS each.
fuzz:
	@./tests/tools/deps.sh fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) ./tests/tools/fuzz.sh

# Deployment checks: the Dockerfile's steps on plain Debian, manifests, and a scale-out behind nginx.
ops: all
	@PE_TEST_JOBS=1 ./tests/tools/run-tests.sh ops ./docker/check-image.sh $(wildcard tests/ops/test_*.sh)

# The dashboard in Debian's Chromium driven by playwright-core (installs both when missing).
browser: $(BUILD)/posencd
	@./tests/tools/deps.sh browser
	@POSENCD=$(BUILD)/posencd ./tests/browser/run.sh

run:
	@./tests/tools/deps.sh build
	$(MAKE) all
	./$(BUILD)/posencd

# The ops scripts, the lint and the browser run join the same pool (mostly waiting on a compiler,
# nginx, node or Chromium, they fill the CPUs the tests leave idle); the serial fault tests still
# run last, alone.
test:
	@./tests/tools/deps.sh build test ops lint browser
	$(MAKE) $(SUBJ) test-programs
	$(MAKE) layers
	$(MAKE) docs-check
	@POSENCD=$(BUILD)/posencd $(RUN_TESTS) $(SUITES) ops: ./docker/check-image.sh $(wildcard tests/ops/test_*.sh) \
		lint: ./tests/tools/lint-openapi.sh browser: ./tests/browser/run.sh

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build tree; the
# CLI tests run that tree's CLI (they run $POSENC_CLI, else build/posenc).
ASAN_MAKE = POSENC_CLI=build/asan/posenc \
	$(MAKE) BUILD=build/asan OPT="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
asan:
	@./tests/tools/deps.sh build test
	$(ASAN_MAKE) $(SUBJ) test-programs
	$(ASAN_MAKE) suites

# The unit and e2e suites under ThreadSanitizer, in build/tsan: the daemon's threads (HTTP, pool,
# ticker, warm filler) under the e2e tests' real traffic. The first report ends the process
# (halt_on_error), so a race fails its test. The fault suite times and loads the daemon against
# the clock and RSS, which ThreadSanitizer's 5-15x slowdown makes meaningless; make asan runs it.
TSAN_MAKE = POSENC_CLI=build/tsan/posenc \
	$(MAKE) BUILD=build/tsan OPT="-O1 -fsanitize=thread -fno-omit-frame-pointer"
tsan:
	@./tests/tools/deps.sh build test
	$(TSAN_MAKE) $(SUBJ) unit-programs e2e-programs
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 $${TSAN_OPTIONS:-}" CK_TIMEOUT_MULTIPLIER=10 \
		$(TSAN_MAKE) tsan-suites
# Without address-space randomisation where the system allows it: GCC 12's runtime refuses to
# start when the kernel randomises more than 28 bits (vm.mmap_rnd_bits).
tsan-suites:
	@norand=$$(setarch $$(uname -m) -R true 2>/dev/null && echo setarch $$(uname -m) -R); \
		$$norand env $(RUN_TESTS) unit $(UNIT_BIN) e2e: $(E2E_BIN)

lint:
	@./tests/tools/deps.sh lint
	@./tests/tools/lint-openapi.sh

# Benchmarks build in their own -O3 tree (make compares times, not flags, so a shared tree would
# keep -O2 objects).
BENCH_BUILD := build/bench/o3
bench:
	@./tests/tools/deps.sh build bench
	$(MAKE) BUILD=$(BENCH_BUILD) OPT="-O3" all $(BENCH_BUILD)/tests/bench/bench_kernels $(BENCH_BUILD)/tests/bench/bench_checks
	BUILD=$(BENCH_BUILD) ./tests/tools/bench.sh

$(BUILD)/tests/bench/bench_checks: tests/bench/bench_checks.c $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) $(PKG_CFLAGS) -o $@ $< $(BUILD)/libposenc.a $(shell pkg-config --libs jansson) $(LIBS_CORE)

# The inline estimate's per-element costs (produce.c), printed per format: diagnostic, nothing asserts.
bench-inline:
	@./tests/tools/deps.sh build bench
	$(MAKE) BUILD=$(BENCH_BUILD) OPT="-O3" $(BENCH_BUILD)/tests/bench/bench_inline
	./$(BENCH_BUILD)/tests/bench/bench_inline

$(BUILD)/tests/bench/bench_inline: tests/bench/bench_inline.c $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) $(PKG_CFLAGS) -o $@ $< $(BUILD)/libposenc.a $(shell pkg-config --libs jansson) $(LIBS_CORE)

$(BUILD)/tests/bench/bench_kernels: tests/bench/bench_kernels.c $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) $(PKG_CFLAGS) -o $@ $< $(BUILD)/libposenc.a $(shell pkg-config --libs jansson) $(LIBS_CORE)

# The float32 printer per SIMD tier (diagnostic, not part of make bench: a few seconds).
$(BUILD)/tests/bench/bench_printer: tests/bench/bench_printer.c $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) $(PKG_CFLAGS) -o $@ $< $(BUILD)/libposenc.a $(LIBS_CORE)

test-exhaustive: all
	$(MAKE) $(BUILD)/tests/exhaustive/test_shortest_all
	./$(BUILD)/tests/exhaustive/test_shortest_all

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj $(BUILD)/obj-hooks -name '*.d' 2>/dev/null)
