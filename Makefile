# fsgd build. `make` builds bin/fsgd and build/libfsgd.a; `make test` runs the
# suite; `make asan` runs it under AddressSanitizer + UBSan; `make bench` runs
# the benchmarks; `make fuzz` runs every fuzz target (FUZZ_SECONDS each) and
# fails when any of them finds a crash (inputs in $(BUILD)/fuzz/artifacts).
#
# Sources are found by globbing, so adding a file needs no Makefile edit:
#   codec/ data/ trainer/   -> build/libfsgd.a   (except trainer/cli/)
#   trainer/cli/*.c         -> bin/fsgd
#   trainer/**/*.cu         -> built with nvcc when CUDA=1
#   tests/unit/test_*.c     -> build/unit/test_*   (each with tests/unit/testmain.c)
#   tests/fuzz/fuzz_*.c     -> build/fuzz-replay/fuzz_* (replay driver), build/fuzz/ (libFuzzer)
#   tests/bench/bench_*.c   -> build/bench/bench_*

BUILD     ?= build
BIN       ?= bin
CC        ?= cc
CUDA_PATH ?= /usr/local/cuda
NVCC      ?= $(CUDA_PATH)/bin/nvcc
# CUDA=1 builds the CUDA backend, CUDA=0 leaves it out; default: when nvcc exists.
CUDA      ?= $(if $(and $(wildcard $(NVCC)),$(wildcard trainer/backend/*.cu)),1,0)
# Device targets; never -arch=native so images run on any listed GPU.
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
WERROR    ?=
OPT       ?= -O2
SAN       ?=

WARN     = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter $(WERROR)
CPPFLAGS = -Icodec/include -Idata/include -Itrainer/include -D_GNU_SOURCE -DFSGD_HAVE_CUDA=$(CUDA)
CFLAGS   = -std=c11 $(OPT) -g $(WARN) -pthread -MMD -MP $(SAN)
LDFLAGS  = -pthread $(SAN)
LDLIBS   = -lrdkafka -llz4 -lyaml -lm

LIB_SRC   := $(shell find codec data trainer -name '*.c' -not -path 'trainer/cli/*' | sort)
CLI_SRC   := $(sort $(wildcard trainer/cli/*.c))
CU_SRC    := $(if $(filter 1,$(CUDA)),$(shell find trainer -name '*.cu' | sort))
TEST_SRC  := $(sort $(wildcard tests/unit/test_*.c))
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
BENCH_SRC := $(sort $(wildcard tests/bench/bench_*.c))

FLAGS_ID  := $(shell echo '$(CC) $(CPPFLAGS) $(CFLAGS) $(CUDA_ARCH)' | cksum | cut -d' ' -f1)
FLAGS_STAMP := $(BUILD)/.flags-$(FLAGS_ID)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
TESTS     := $(TEST_SRC:tests/unit/%.c=$(BUILD)/unit/%)
REPLAYS   := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz-replay/%)
BENCHES   := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)
LIBFSGD   := $(BUILD)/libfsgd.a
FSGD      := $(BIN)/fsgd

ifeq ($(CUDA),1)
  LDFLAGS += -L$(CUDA_PATH)/lib64 -Wl,-rpath,$(CUDA_PATH)/lib64
  # cub (used by backend_cuda.cu) needs the C++ runtime; we link with $(CC).
  LDLIBS  += -lcusparse -lcudart -lstdc++
endif

.PHONY: all test asan bench fuzz clean check-deps deps run check
all: $(FSGD) $(LIBFSGD)

$(FLAGS_STAMP):
	@mkdir -p $(BUILD) && rm -f $(BUILD)/.flags-* && touch $@

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O2 $(CUDA_ARCH) $(CPPFLAGS) -Xcompiler -Wall,-Wextra -MMD -MP -c $< -o $@

$(LIBFSGD): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(FSGD): $(CLI_OBJ) $(LIBFSGD)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(CLI_OBJ) $(LIBFSGD) $(LDLIBS) -o $@

$(BUILD)/unit/%: $(BUILD)/tests/unit/%.o $(BUILD)/tests/unit/testmain.o $(LIBFSGD)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcunit -o $@

$(BUILD)/fuzz-replay/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/tests/fuzz/replay_main.o $(LIBFSGD)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/bench/%: $(BUILD)/tests/bench/%.o $(LIBFSGD)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# Unit tests, fuzz corpus replay and integration scripts; prints
# "N passed, N failed, N skipped" last and fails if anything failed.
test: all $(TESTS) $(REPLAYS)
	BUILD=$(BUILD) FSGD=$(FSGD) tests/run_tests.sh

asan:
	$(MAKE) BUILD=build-asan BIN=build-asan/bin CUDA=0 OPT=-O1 \
	    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

bench: all $(BENCHES)
	BUILD=$(BUILD) FSGD=$(FSGD) tests/bench/run_bench.sh

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_TARGETS ?=
FUZZ_CORPUS  ?=
fuzz:
	BUILD=$(BUILD) FUZZ_CC=$(FUZZ_CC) FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" \
	    FUZZ_CORPUS="$(FUZZ_CORPUS)" tests/fuzz/run_fuzz.sh

check-deps:
	@scripts/install-deps.sh --check

deps:
	@scripts/install-deps.sh

# README command 1: install, build, run the default job on the embedded broker.
RUN_JOB ?= jobs/a9a.yaml
run: deps
	$(MAKE) all
	@mkdir -p out
	$(FSGD) run $(RUN_JOB)

# README command 2 (and CI): install, build, the suite, then the suite under sanitizers.
check: deps
	$(MAKE) test
	$(MAKE) asan

clean:
	rm -rf build build-asan bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
