# tram — build, set-up and tests.  `make help` lists the targets.
#
# Sources are picked up by wildcard: a new module is a new .c file in its
# directory, nothing to register here.  cli/main.c is the CLI entry
# point; everything else goes into build/libtram.a, which the tests link too.

CC       ?= gcc
CXX      ?= g++
NVCC     ?= nvcc
BUILD    ?= build
PYTHON   ?= python3


DEFAULT_MODEL := models/SmolLM2-135M-Instruct.Q4_1.gguf
PKGS          := openblas jansson libevent libevent_pthreads libpcre2-8 sentencepiece

WARN     := -Wall -Wextra -Werror
CPPFLAGS += -I. -D_GNU_SOURCE -MMD -MP $(shell pkg-config --cflags openblas 2>/dev/null)
CFLAGS   ?= -O2 -g -march=native
CFLAGS   += -std=c11 $(WARN) -fopenmp -fno-strict-aliasing
CXXFLAGS ?= -O2 -g -march=native
CXXFLAGS += -std=c++17 $(WARN)
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lstdc++ -lm -lpthread -fopenmp

LIB_C   := $(filter-out cli/main.c,$(wildcard kernels/*.c kernels/cpu/*.c models/*.c tokenizer/*.c chat/*.c grammar/*.c engine/*.c server/*.c cli/*.c))
LIB_CXX := $(wildcard tokenizer/*.cc)
LIB_OBJ := $(LIB_C:%.c=$(BUILD)/%.o) $(LIB_CXX:%.cc=$(BUILD)/%.o)
TEST_C  := $(wildcard tests/unit/*.c)
TEST_OBJ:= $(TEST_C:%.c=$(BUILD)/%.o)

.PHONY: all deps model docs test test-docs test-layering test-unit test-cuda-compile test-api test-gpu-dry test-fleet test-deploy test-asan cuda cuda-build serve golden fuzz-gguf fuzz-api fuzz-grammar fuzz-tools fuzz-jinja fuzz-validate gpu-check clean help
.DEFAULT_GOAL := all

all: $(BUILD)/.deps-ok bin/tram

help:
	@echo "make            build bin/tram (CPU backend); installs missing packages first"
	@echo "make serve      fetch the default model, build, and serve it on 127.0.0.1:8000"
	@echo "make test       every test (layering, unit, API, fleet, deploy/, and 'make cuda' when nvcc exists)"
	@echo "make docs       regenerate docs/api-fields.md and the --help texts quoted in docs/"
	@echo "make test-asan  the unit suite under AddressSanitizer, UBSan and LeakSanitizer"
	@echo "make cuda       also compile and link the CUDA backend (bin/tram-cuda, sm_90a)"
	@echo "make gpu-check  on a machine with an NVIDIA GPU: kernels vs CPU, end to end, benchmark"
	@echo "make compare    tram beside llama.cpp and transformers on this CPU (bench/results/compare-cpu.md)"
	@echo "make golden     regenerate golden fixtures with Hugging Face transformers (needs torch)"
	@echo "make fuzz-gguf  libFuzzer on the GGUF reader (FUZZ_SECONDS=600)"
	@echo "make fuzz-api   libFuzzer on the API request parser (FUZZ_SECONDS=600)"
	@echo "make fuzz-grammar libFuzzer on the JSON Schema / regex compilers and the GBNF parser (FUZZ_SECONDS=600)"
	@echo "make fuzz-tools libFuzzer on the streamed tool-call reader (FUZZ_SECONDS=600)"
	@echo "make fuzz-jinja libFuzzer on the chat-template interpreter (FUZZ_SECONDS=600)"
	@echo "make fuzz-validate libFuzzer on the JSON Schema validator (FUZZ_SECONDS=600)"
	@echo "make json-schema-suite SUITE=dir  the JSON Schema validator on the official test suite"

# ---------------------------------------------------------------- set-up
# The stamp records that the Debian packages are present; deps.sh installs
# what is missing (apt-get when root, else it prints the exact command).
$(BUILD)/.deps-ok: tests/deps.sh
	@sh tests/deps.sh packages
	@mkdir -p $(BUILD) && touch $@

deps: $(BUILD)/.deps-ok model

model: $(DEFAULT_MODEL)
$(DEFAULT_MODEL): models/fetch_default_model.sh
	@sh models/fetch_default_model.sh $@

# ---------------------------------------------------------------- build
bin/tram: $(BUILD)/cli/main.o $(BUILD)/libtram.a
	@mkdir -p bin
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/libtram.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.cc | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c -o $@ $<

# ---------------------------------------------------------------- tests
$(BUILD)/tests/unit/run: $(TEST_OBJ) $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS) -lcriterion

# The CUDA compile comes before the API tests: they also run bin/tram-cuda's
# flag checks (tests/api/test_tensor_parallel.py) when it exists.
test: deps all test-layering test-docs test-unit test-cuda-compile test-api test-gpu-dry test-fleet test-deploy

test-cuda-compile:
	@if command -v $(NVCC) >/dev/null 2>&1; then $(MAKE) --no-print-directory cuda; \
	 else echo "nvcc not found: skipping the CUDA compile check"; fi

# Each include points down the layers and no two files call each other
# (docs/ARCHITECTURE.md); the script's own test plants an upward include into
# a copy of the sources, and two object files that call each other.
test-layering: $(BUILD)/libtram.a
	@BUILD=$(BUILD) sh tests/layering/test.sh

# docs/api-fields.md and the --help texts the docs quote are generated from
# the code: `make docs` writes them, test-docs fails when they differ.
docs: bin/tram
	@python3 tests/docs/docs.py --write

test-docs: bin/tram
	@sh tests/docs/test.sh

test-unit: $(BUILD)/tests/unit/run model
	$(BUILD)/tests/unit/run -j2

test-api: bin/tram model
	@sh tests/api/run.sh

# Three replicas behind nginx: a drain, a kill, single-flight (tests/fleet/).
test-fleet: bin/tram model
	@sh tests/fleet/run.sh

# deploy/'s Kubernetes manifests, Prometheus rules and dashboard, checked
# offline (tests/deploy/run.sh says with what).
test-deploy:
	@sh tests/deploy/run.sh

# The sanitizer flags travel in the environment, not on make's command line:
# there they would replace CFLAGS whole, dropping the "+=" part (-std=c11, the
# warnings, -fopenmp).  UB halts its test like an ASan error.  A leak found as
# a test's process exits does not fail that test, so every sanitizer writes
# its reports to files, and any report fails the target.
SAN_FLAGS   := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer
SAN_REPORTS := build/asan/reports
SAN_ENV     := ASAN_OPTIONS=detect_leaks=1:log_path=$(CURDIR)/$(SAN_REPORTS)/asan \
               UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(CURDIR)/$(SAN_REPORTS)/ubsan
test-asan: model
	CFLAGS="$(SAN_FLAGS)" CXXFLAGS="$(SAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" \
	        $(MAKE) --no-print-directory BUILD=build/asan build/asan/tests/unit/run
	@rm -rf $(SAN_REPORTS) && mkdir -p $(SAN_REPORTS)
	$(SAN_ENV) build/asan/tests/unit/run -j2
	@if [ -n "$$(ls $(SAN_REPORTS))" ]; then cat $(SAN_REPORTS)/*; \
	    echo "test-asan: sanitizer reports above (in $(SAN_REPORTS))"; exit 1; fi

golden:
	@sh tests/fixtures/make_golden.sh

# ---------------------------------------------------------------- CUDA
# bin/tram-cuda holds both backends; `--device cuda` selects the GPU one.  The
# sub-make builds everything under build/cuda with -DTRAM_CUDA, so CPU objects
# of the two builds never mix.  The GPU check programs are linked too, so that
# CI (no GPU) keeps them compiling.
CUDA_HOME  ?= $(or $(patsubst %/bin/nvcc,%,$(shell which $(NVCC) 2>/dev/null)),/usr/local/cuda)
NVCC_BIN   := $(if $(shell which $(NVCC) 2>/dev/null),$(NVCC),$(CUDA_HOME)/bin/nvcc)
CUDA_ARCH  ?= -gencode=arch=compute_90a,code=sm_90a
NVCCFLAGS  ?= -O3 -std=c++17 $(CUDA_ARCH) -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror
CUDA_SRC   := $(wildcard kernels/cuda/*.cu)
CUDA_OBJ   := $(CUDA_SRC:%.cu=$(BUILD)/%.o)
CUDA_LIBDIR = $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))
CUDA_LIBS   = -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublasLt -lcublas -lnccl -lcudart
# every tests/gpu/X.c or X.cu is a program (tests/gpu/run.sh runs and bundles them)
GPU_PROGS  := $(patsubst %,$(BUILD)/%,$(basename $(wildcard tests/gpu/*.c tests/gpu/*.cu)))

# CUDA_BUILD and CUDA_BIN let tests/gpu/run.sh build its portable bundle
# beside this build.
CUDA_BUILD ?= build/cuda
CUDA_BIN   ?= bin/tram-cuda

cuda: $(BUILD)/.deps-ok
	$(MAKE) --no-print-directory BUILD=$(CUDA_BUILD) CPPFLAGS_EXTRA=-DTRAM_CUDA cuda-build

cuda-build: $(CUDA_BIN) $(GPU_PROGS)

# CUDA objects before the archive: they call into it (tram_fail, ...).
$(CUDA_BIN): $(BUILD)/cli/main.o $(CUDA_OBJ) $(BUILD)/libtram.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS) $(CUDA_LIBS)

.PRECIOUS: $(BUILD)/tests/gpu/%.o
$(BUILD)/tests/gpu/%: $(BUILD)/tests/gpu/%.o $(CUDA_OBJ) $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS) $(CUDA_LIBS)

CPPFLAGS += $(CPPFLAGS_EXTRA)

$(BUILD)/%.o: %.cu | $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(NVCC_BIN) $(NVCCFLAGS) -I. $(CUDA_INC) -DTRAM_CUDA -MMD -MP -c -o $@ $<

# cuSPARSELt's header, for sparse24.cu's prototypes only: the library is
# dlopened at run time, never linked (kernels/cuda/fetch_cusparselt.sh
# fetches the pinned wheel once, into a cache outside the clone).
CUSPARSELT_DIR := build/cusparselt
$(CUSPARSELT_DIR)/include/cusparseLt.h: kernels/cuda/fetch_cusparselt.sh
	sh kernels/cuda/fetch_cusparselt.sh $(CUSPARSELT_DIR)
$(BUILD)/kernels/cuda/sparse24.o: CUDA_INC = -I$(CUSPARSELT_DIR)/include
$(BUILD)/kernels/cuda/sparse24.o: $(CUSPARSELT_DIR)/include/cusparseLt.h

gpu-check:
	@sh tests/gpu/run.sh

# The GPU check's control flow, here: every step against stand-in programs,
# with planted failures, a hang, a missing library and a stale bundle.
.PHONY: test-gpu-dry
test-gpu-dry:
	@sh tests/gpu/test_dry_run.sh

# ---------------------------------------------------------------- run
serve: deps all
	bin/tram serve -m $(DEFAULT_MODEL)

# ---------------------------------------------------------------- compare
# Side by side with llama.cpp and transformers on this machine (installs the
# peers under bench/peers/ first); writes bench/results/compare-cpu.md.
# COMPARE_QUICK=1 for a smoke run; bench/compare.sh lists the other knobs.
.PHONY: compare
compare: all model $(BUILD)/bench/stream
	@sh bench/compare.sh

$(BUILD)/bench/stream: $(BUILD)/bench/stream.o $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/gemv_pages: $(BUILD)/bench/gemv_pages.o $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/kv_cache: $(BUILD)/bench/kv_cache.o $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/sparse_gemm: $(BUILD)/bench/sparse_gemm.o $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/fp8_gemm: $(BUILD)/bench/fp8_gemm.o $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/kv_attention: $(BUILD)/bench/kv_attention.o $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/lora_step: $(BUILD)/bench/lora_step.o $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/sampling: $(BUILD)/bench/sampling.o $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/verify_gemm: $(BUILD)/bench/verify_gemm.o $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

# ---------------------------------------------------------------- JSON Schema suite
# The validator's pass rate on the official JSON-Schema-Test-Suite, read from
# a checkout of it that is not part of the project: make json-schema-suite
# SUITE=dir (dir holds tests/draft4 ... tests/draft2020-12; -v lists failures
# with SUITE_FLAGS=-v).
.PHONY: json-schema-suite
json-schema-suite: $(BUILD)/bench/json_schema_suite
	@test -n "$(SUITE)" || { echo "json-schema-suite: set SUITE=dir (a JSON-Schema-Test-Suite checkout)"; exit 2; }
	$(BUILD)/bench/json_schema_suite $(SUITE_FLAGS) $(SUITE)

$(BUILD)/bench/json_schema_suite: $(BUILD)/bench/json_schema_suite.o $(BUILD)/libtram.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

# ---------------------------------------------------------------- fuzz
FUZZ_SECONDS ?= 600
# A target links the sources listed in FUZZ_SRC_<name>, or the whole library
# when there is no list.  UB aborts, so the fuzzer records it as a crash.
# (A static pattern rule: make skips implicit-rule search for .PHONY targets.)
FUZZ_SRC_gguf := models/gguf.c kernels/dequant.c kernels/base.c
# the parser links with the base helpers; jansson rides in the list since a list gets no pkg-config libs
FUZZ_SRC_api  := server/api_request.c server/api_error.c server/api_fields.c server/api_tools.c \
                 server/json_body.c grammar/json_big_bounds.c kernels/base.c kernels/strbuf.c kernels/utf8.c -ljansson
# the grammar front ends: schema and regex compilers, the GBNF parser, the stack matcher
FUZZ_SRC_grammar := grammar/gbnf.c grammar/gbnf_factor.c grammar/utf8_ranges.c grammar/stacks.c \
                    $(wildcard grammar/json_schema*.c) grammar/json_equal.c grammar/json_big_bounds.c $(wildcard grammar/regex*.c) \
                    grammar/gbnf_text.c kernels/base.c kernels/strbuf.c kernels/utf8.c -ljansson -lpcre2-8
# the streamed tool-call reader and the JSON writer under it
FUZZ_SRC_tools := server/tool_calls.c server/json_scan.c server/api_tools.c server/api_error.c \
                  server/api_fields.c server/json_body.c grammar/json_big_bounds.c \
                  chat/pyjson.c kernels/strbuf.c kernels/base.c kernels/utf8.c -ljansson
# the chat-template interpreter, parsing and rendering
FUZZ_SRC_jinja := $(wildcard chat/jinja_*.c) chat/pyjson.c tokenizer/text_buf.c kernels/strbuf.c \
                  kernels/base.c -ljansson -lpthread
# templates up to 4 MiB (libFuzzer's default is 4 KB, too small for a chain
# 200,000 deep), with the deep shapes generated as seeds
FUZZ_FLAGS_jinja := -max_len=4194304
FUZZ_SEEDS_jinja := $(BUILD)/fuzz/seeds-jinja-deep
fuzz-jinja: $(FUZZ_SEEDS_jinja)
$(FUZZ_SEEDS_jinja): tests/fuzz/deep_jinja_seeds.py
	python3 $< $@
# inputs past libFuzzer's default 4 KB: the chain templates reach megabyte grammars from a few bytes
FUZZ_FLAGS_grammar := -max_len=300000
# the JSON Schema validator: compile, references, every keyword, formats
FUZZ_SRC_validate := $(wildcard grammar/json_validate*.c) grammar/json_equal.c grammar/json_big_bounds.c \
                     kernels/base.c kernels/strbuf.c -ljansson -lpcre2-8
fuzz-gguf fuzz-api fuzz-grammar fuzz-tools fuzz-jinja fuzz-validate: fuzz-%: tests/fuzz/fuzz_%.c
	@mkdir -p $(BUILD)/fuzz tests/fuzz/corpus-$*
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I. -D_GNU_SOURCE \
	      $(shell pkg-config --cflags openblas) -o $(BUILD)/fuzz/fuzz_$* $< $(or $(FUZZ_SRC_$*),$(LIB_C)) \
	      $(if $(FUZZ_SRC_$*),,$(shell pkg-config --libs $(PKGS)) -lstdc++ -lpthread) -lm
	$(BUILD)/fuzz/fuzz_$* -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 $(FUZZ_FLAGS_$*) \
	      $(addprefix -dict=,$(wildcard tests/fuzz/$*.dict)) tests/fuzz/corpus-$* tests/fuzz/seeds-$* $(FUZZ_SEEDS_$*)

clean:
	rm -rf build bin

-include $(shell find $(BUILD) -name '*.d' -type f 2>/dev/null)
