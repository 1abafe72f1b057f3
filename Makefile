# fsgd build. `make` builds bin/fsgd and build/libfsgd.a; `make test` runs the
# suite; `make asan` runs it under AddressSanitizer + UBSan; `make bench` runs
# the benchmarks; `make fuzz` runs every fuzz target (FUZZ_SECONDS each) and
# fails when any of them finds a crash (inputs in $(BUILD)/fuzz/artifacts).
#
# Sources are found by globbing, so adding a file needs no Makefile edit:
#   common/ codec/ data/ strategy/ trainer/ -> build/libfsgd.a (except trainer/cli/)
#   trainer/cli/*.c         -> bin/fsgd
#   trainer/**/*.cu         -> built with nvcc when CUDA=1
#   tests/unit/test_*.c     -> build/unit/test_*   (each with tests/unit/testmain.c)
#   tests/fuzz/fuzz_*.c     -> build/fuzz-replay/fuzz_* (replay driver), build/fuzz/ (libFuzzer)
#   tests/bench/bench_*.c   -> build/bench/bench_*
#   tests/fuzz/tools/*.c    -> build/fuzz-tools/* (on request)

BUILD     ?= build
BIN       ?= bin
CC        ?= cc
# CUDA toolkit: CUDA_PATH if given; else /usr/local/cuda, as users expect;
# else the project's own wheel-built toolkit (scripts/install-cuda-wheels.sh).
# A toolkit counts only when every piece the backend needs is there, so a
# partial one (nvcc without cuSPARSE, say) gives a CPU build and one line
# saying what is missing, never a broken build.
CUDA_WHEELS := .deps/cuda
cuda_missing = $(strip \
    $(if $(wildcard $(1)/bin/nvcc),,bin/nvcc) \
    $(if $(wildcard $(1)/include/cuda_runtime.h),,include/cuda_runtime.h) \
    $(if $(wildcard $(1)/include/cusparse.h),,include/cusparse.h) \
    $(if $(wildcard $(1)/lib64/libcudart.so $(1)/lib/libcudart.so),,lib64/libcudart.so) \
    $(if $(wildcard $(1)/lib64/libcusparse.so $(1)/lib/libcusparse.so),,lib64/libcusparse.so))
CUDA_SEARCHED = under $(CUDA_PATH)
ifeq ($(origin CUDA_PATH),undefined)
  CUDA_SEARCHED := under /usr/local/cuda or $(CUDA_WHEELS)
  CUDA_PATH := $(if $(call cuda_missing,/usr/local/cuda),$(if $(call cuda_missing,$(CUDA_WHEELS)),/usr/local/cuda,$(abspath $(CUDA_WHEELS))),/usr/local/cuda)
endif
CUDA_MISSING := $(call cuda_missing,$(CUDA_PATH))
CUDA_LIBDIR  := $(firstword $(wildcard $(CUDA_PATH)/lib64/libcusparse.so $(CUDA_PATH)/lib/libcusparse.so))
CUDA_LIBDIR  := $(abspath $(dir $(if $(CUDA_LIBDIR),$(CUDA_LIBDIR),$(CUDA_PATH)/lib64/)))
NVCC      ?= $(CUDA_PATH)/bin/nvcc
# CUDA=1 builds the CUDA backend (and fails at once if a piece is missing),
# CUDA=0 leaves it out; default: on when the toolkit is complete.
ifeq ($(origin CUDA),undefined)
  ifneq ($(wildcard trainer/backend/*.cu),)
    CUDA := $(if $(CUDA_MISSING),0,1)
    ifneq ($(CUDA_MISSING),)
      ifneq ($(MAKECMDGOALS),clean)
        $(info fsgd: CUDA backend left out: $(CUDA_MISSING) not found $(CUDA_SEARCHED); building the CPU backend)
      endif
    endif
  else
    CUDA := 0
  endif
else ifeq ($(CUDA),1)
  ifneq ($(CUDA_MISSING),)
    $(error CUDA=1 but $(CUDA_MISSING) not found under $(CUDA_PATH) (set CUDA_PATH, run scripts/install-cuda-wheels.sh, or build with CUDA=0))
  endif
endif
# What `fsgd features` reports: nvcc's release and the folder it came from.
CUDA_TOOLKIT := $(if $(filter 1,$(CUDA)),$(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\), V\([0-9.]*\).*/\2/p') at $(abspath $(CUDA_PATH)))
# Device targets; never -arch=native so images run on any listed GPU.
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
WERROR    ?=
OPT       ?= -O2
# A short line per step ("  CC      codec/fastsgd.c"); V=1 prints the full commands.
V ?= 0
ifeq ($(V),1)
  Q   :=
  say := @true
else
  Q   := @
  say := @printf '  %-7s %s\n'
endif
SAN       ?=

WARN     = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter $(WERROR)
# Modules and what each may include (enforced: a module sees only the
# public headers, M/include/fsgd/, of the modules below it; its own private
# headers sit beside its sources):
#   common/   errors, CRC32C, little-endian, sparse vectors, key sorting
#   codec/    gradient codecs (common)
#   data/     LIBSVM and generated data (common)
#   strategy/ the two-way compression strategies (common, codec)
#   trainer/  one module per folder, each with its own public headers:
#     loss/        the three losses, as C and as CUDA device code (common)
#     backend/     gradients on the CPU and CUDA backends (loss; codec, data)
#     core/        training parameters, models, Adam, metrics, output files,
#                  fsgd train (backend, loss; strategy, data)
#     kafka/       the transport: Kafka clients, frames, a job's key (common
#                  only: its settings and key are its own structs, not a job's)
#     distributed/ the producer, worker and aggregator roles (core, kafka and
#                  what they see)
#     job/         a job: YAML, --set and flags into each owner's settings
#                  (core's, kafka's, distributed's), and the bindings' API
#                  (distributed and what it sees)
#     observe/     /metrics, progress lines (job and what it sees)
#     serve/       fsgd serve's HTTP scoring server (observe and what it sees)
#     cli/         the commands (everything)
# So core calls the backends, which share loss/'s formulas (not core's);
# the roles emit their step statistics through hooks (fsgd/dist.h) that the
# CLI wires to observe/. A folder of trainer/ needs its INC_trainer_ line.
INC_common   = -Icommon/include
INC_codec    = $(INC_common) -Icodec/include
INC_data     = $(INC_common) -Idata/include
INC_strategy = $(INC_codec) -Istrategy/include
INC_trainer_loss        = $(INC_common) -Itrainer/loss/include
INC_trainer_backend     = $(INC_codec) -Idata/include -Itrainer/loss/include -Itrainer/backend/include
INC_trainer_core        = $(INC_strategy) -Idata/include -Itrainer/loss/include -Itrainer/backend/include \
                          -Itrainer/core/include
INC_trainer_kafka       = $(INC_common) -Itrainer/kafka/include
INC_trainer_distributed = $(INC_trainer_core) -Itrainer/kafka/include -Itrainer/distributed/include
INC_trainer_job         = $(INC_trainer_distributed) -Itrainer/job/include
INC_trainer_observe     = $(INC_trainer_job) -Itrainer/observe/include
INC_trainer_serve       = $(INC_trainer_observe) -Itrainer/serve/include
INC_trainer_cli         = $(INC_trainer_serve)
INC_tests    = $(INC_trainer_cli)
# Tests that look inside a module include its private headers (those beside
# its sources) by plain name, through an -I for that folder that only the
# tests listed here get; any other test that tries does not build (and no
# test reaches a folder with "../": tests/integration/include_direction.sh).
PRIVATE_DIRS := common codec data strategy trainer/loss trainer/backend trainer/core trainer/kafka trainer/distributed trainer/job \
                trainer/observe trainer/serve tests/unit
PRIVATE_common              := test_reduce test_strategy fuzz_gradiveq
PRIVATE_codec               := test_codec_fastpath test_codec test_strategy_mqgrad test_downlink test_strategy_efsign \
                               test_codec_props test_cuda_encoder_host
PRIVATE_data                := test_libsvm_fields test_delim fuzz_delim test_gen test_rowcache test_train
PRIVATE_strategy            := test_strategy_gradiveq fuzz_gradiveq test_strategy_gtopk test_strategy_efsign test_strategy \
                               fuzz_gtopk_section
PRIVATE_trainer/loss        := test_loss test_backend_parity
PRIVATE_trainer/backend     := test_backend_parity test_cuda_encoder_host bench_backend
PRIVATE_trainer/core        := test_keyslots test_train_stale test_train_memory test_ftrl test_train
PRIVATE_trainer/job         := test_train fuzz_job
PRIVATE_trainer/kafka       := test_kafka_frame test_kafka_topics test_bus_mem test_ctl_versions test_follow test_produce \
                               test_roles test_roles_shards
PRIVATE_trainer/distributed := test_agg_best test_agg_table test_agg_members test_inflight test_pull_cache test_kafka_frame test_wire_golden fuzz_cdelta fuzz_checkpoint fuzz_ctl fuzz_wire fuzz_pull \
                               gen_kafka_corpus
PRIVATE_trainer/observe     := test_observe test_prom
PRIVATE_trainer/serve       := fuzz_serve_metrics fuzz_serve_request test_serve test_serve_slot
PRIVATE_trainer/distributed += test_ctl_versions fuzz_ctl_version test_observe
PRIVATE_tests/unit          := bench_learned
private_inc = $(strip $(foreach d,$(PRIVATE_DIRS),$(if $(filter $(1),$(PRIVATE_$(d))),-I$(d))))
# The same for tests/fuzz/run_fuzz.sh, which builds the fuzz targets itself:
# "fuzz_x=folder" pairs.
FUZZ_PRIVATE := $(foreach d,$(PRIVATE_DIRS),$(addsuffix =$(d),$(filter fuzz_%,$(PRIVATE_$(d)))))
# The CUDA backend is a plugin that fsgd loads only when asked for the cuda
# backend (trainer/backend/backend_cuda_plugin.c), so a CPU run never loads
# cuSPARSE: BIN/../lib/fsgd/backend_cuda.so.
CUDA_PLUGIN := $(patsubst ./%,%,$(dir $(BIN)))lib/fsgd/backend_cuda.so
PLUGIN    := $(if $(filter 1,$(CUDA)),$(CUDA_PLUGIN))
CPPFLAGS = -D_GNU_SOURCE -DFSGD_HAVE_CUDA=$(CUDA) -DFSGD_CUDA_TOOLKIT='"$(CUDA_TOOLKIT)"'
CPPFLAGS += $(if $(PLUGIN),-DFSGD_CUDA_PLUGIN_BUILT='"$(abspath $(PLUGIN))"')
# The include path of a source: its top folder's INC_ set; under trainer/,
# its folder's INC_trainer_ set; under tests/, the private folders it is
# listed for; last, LAYERING.
module_inc = $(if $(filter trainer,$(firstword $(subst /, ,$(1)))),$(call trainer_inc,$(word 2,$(subst /, ,$(1)))),$(INC_$(firstword $(subst /, ,$(1))))) $(if $(filter tests,$(firstword $(subst /, ,$(1)))),$(call private_inc,$(basename $(notdir $(1))))) -I$(LAYERING)
trainer_inc = $(or $(INC_trainer_$(1)),$(error trainer/$(1)/ has no include path: add INC_trainer_$(1) to the Makefile's list of modules))
# A public header that a module may not include is found only here, last on
# every path: a stub whose #error names the header's module, so the
# compiler's "In file included from trainer/core/x.c:3" says who included
# it (tests/integration/include_direction.sh).
PUBLIC_HDRS := $(sort $(wildcard */include/fsgd/*.h trainer/*/include/fsgd/*.h))
LAYERING    := $(BUILD)/layering

CFLAGS   = -std=c11 $(OPT) -g $(WARN) -pthread -MMD -MP $(SAN)
LDFLAGS  = -pthread $(SAN)
LDLIBS   = -lrdkafka -llz4 -lz -lzstd -lyaml -lmicrohttpd -ljansson -lsodium -llapacke -lopenblas -lm

LIB_SRC   := $(shell find common codec data strategy trainer -name '*.c' -not -path 'trainer/cli/*' 2>/dev/null | sort)
CLI_SRC   := $(sort $(wildcard trainer/cli/*.c))
CU_SRC    := $(if $(filter 1,$(CUDA)),$(shell find trainer -name '*.cu' | sort))
TEST_SRC  := $(sort $(wildcard tests/unit/test_*.c))
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
BENCH_SRC := $(sort $(wildcard tests/bench/bench_*.c))

FLAGS_ID  := $(shell echo '$(CC) $(subst ',,$(CPPFLAGS)) $(CFLAGS) $(CUDA_ARCH)' | cksum | cut -d' ' -f1)
FLAGS_STAMP := $(BUILD)/.flags-$(FLAGS_ID)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
CU_OBJ    := $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
TESTS     := $(TEST_SRC:tests/unit/%.c=$(BUILD)/unit/%)
REPLAYS   := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz-replay/%)
BENCHES   := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)
LIBFSGD   := $(BUILD)/libfsgd.a
# The shared library the Python package (python/) loads with ctypes: the
# library and the CLI's commands (fsgd.train is fsgd_cmd_train), compiled
# position-independent into $(BUILD)/pic; lib/libfsgd.so beside the CUDA plugin.
PIC_OBJ   := $(LIB_SRC:%.c=$(BUILD)/pic/%.o) $(CLI_SRC:%.c=$(BUILD)/pic/%.o)
SHLIB     := $(patsubst ./%,%,$(dir $(BIN)))lib/libfsgd.so
FSGD      := $(BIN)/fsgd

LDLIBS += -ldl
ifeq ($(CUDA),1)
  # The plugin calls fsgd functions of the executable that loads it.
  LDFLAGS  += -rdynamic
endif

.PHONY: all test asan bench fuzz clean check-deps deps run check data shlib
all: $(FSGD) $(LIBFSGD) $(PLUGIN)

$(FLAGS_STAMP):
	@mkdir -p $(BUILD) && rm -f $(BUILD)/.flags-* && touch $@

$(LAYERING)/.stamp: $(PUBLIC_HDRS)
	@rm -rf $(LAYERING) && mkdir -p $(LAYERING)/fsgd
	@for h in $(PUBLIC_HDRS); do \
	    printf '#error "fsgd/%s belongs to %s/, which this module may not include (the modules and their order: Makefile)"\n' \
	        "$${h##*/}" "$${h%/include/fsgd/*}" >$(LAYERING)/fsgd/$${h##*/}; \
	done && touch $@

$(BUILD)/%.o: %.c $(FLAGS_STAMP) | $(LAYERING)/.stamp
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(call module_inc,$<) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(FLAGS_STAMP) | $(LAYERING)/.stamp
	@mkdir -p $(dir $@)
	$(say) nvcc $<
	$(Q)$(NVCC) -std=c++17 -O2 $(CUDA_ARCH) $(call module_inc,$<) $(CPPFLAGS) -Xcompiler -Wall,-Wextra,-fPIC -MMD -MP -c $< -o $@

# cub (used by backend_cuda.cu) needs the C++ runtime; we link with $(CC).
$(CUDA_PLUGIN): $(CU_OBJ)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) -shared -pthread $(CU_OBJ) -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcusparse -lcudart -lstdc++ -o $@

$(BUILD)/pic/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(say) CC-PIC $<
	$(Q)$(CC) $(call module_inc,$<) $(CPPFLAGS) $(CFLAGS) -fPIC -c $< -o $@

shlib: $(SHLIB)
$(SHLIB): $(PIC_OBJ) | $(PLUGIN)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) -shared $(LDFLAGS) $(PIC_OBJ) $(LDLIBS) -o $@

$(LIBFSGD): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(say) AR $@
	$(Q)rm -f $@ && ar rcs $@ $^

$(FSGD): $(CLI_OBJ) $(LIBFSGD) | $(PLUGIN)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) $(CLI_OBJ) $(LIBFSGD) $(LDLIBS) -o $@

# The data sets of data/sets (some xz-compressed), unpacked and checked
# against data/sets/SHA256SUMS: tests and benchmarks read them there (or in
# $FSGD_DATA), so a clone needs nothing beside it.
DATA_DIR   := $(BUILD)/datasets
DATA_STAMP := $(DATA_DIR)/.sha256sums
data: $(DATA_STAMP)
$(DATA_STAMP): data/sets/SHA256SUMS $(wildcard data/sets/*.xz) scripts/unpack-data.sh
	scripts/unpack-data.sh $(DATA_DIR) >/dev/null && touch $@
$(BUILD)/tests/unit/testmain.o: CPPFLAGS += -DFSGD_TEST_DATA_DIR='"$(DATA_DIR)"'

$(BUILD)/unit/%: $(BUILD)/tests/unit/%.o $(BUILD)/tests/unit/testmain.o $(LIBFSGD) | $(PLUGIN) $(DATA_STAMP)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcunit -o $@

$(BUILD)/fuzz-replay/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/tests/fuzz/replay_main.o $(LIBFSGD)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/bench/%: $(BUILD)/tests/bench/%.o $(LIBFSGD) | $(PLUGIN) $(DATA_STAMP)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The generator of the Kafka-side fuzz seeds (run by hand: its comment).
$(BUILD)/fuzz-tools/%: $(BUILD)/tests/fuzz/tools/%.o $(LIBFSGD)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# Unit tests, fuzz corpus replay and integration scripts; prints
# "N passed, N failed, N skipped" last and fails if anything failed.
# T=PATTERN: only the tests whose file name contains it (tests/README.md).
test: all $(TESTS) $(REPLAYS) data $(SHLIB)
	BUILD=$(BUILD) FSGD=$(FSGD) T="$(T)" tests/run_tests.sh

asan:
	FSGD_SANITIZED=1 $(MAKE) BUILD=build-asan BIN=build-asan/bin CUDA=0 OPT=-O1 \
	    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

# deps first: tests/bench/peers_compare.sh needs LIBLINEAR and the venv it installs.
bench: deps
	$(MAKE) all $(BENCHES)
	BUILD=$(BUILD) FSGD=$(FSGD) tests/bench/run_bench.sh

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_TARGETS ?=
FUZZ_CORPUS  ?=
fuzz:
	BUILD=$(BUILD) FUZZ_CC=$(FUZZ_CC) FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" \
	    FUZZ_CORPUS="$(FUZZ_CORPUS)" FUZZ_PRIVATE="$(FUZZ_PRIVATE)" tests/fuzz/run_fuzz.sh

check-deps:
	@scripts/install-deps.sh --check

deps:
	@scripts/install-deps.sh

# README command 1: install, build, run the default job on the embedded broker;
# the data sets unpacked too, for the README's next commands (bench codec).
RUN_JOB ?= jobs/a9a.yaml
run:
	@scripts/install-deps.sh --run
	$(MAKE) all data
	@mkdir -p out
	$(FSGD) run $(RUN_JOB)

# README command 2 (and CI): install, build, the suite, then the suite under sanitizers.
check: deps
	$(MAKE) test
	$(MAKE) asan

# Keeps build/venv (scripts/install-peers.sh) and build/compose-cache
# (tests/integration/compose_up.sh's debootstrap): rebuilding them means a download.
clean:
	rm -rf build-asan bin lib
	[ ! -d build ] || find build -mindepth 1 -maxdepth 1 ! -name venv ! -name compose-cache -exec rm -rf {} +

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
