# Thin wrapper over CMake. `make` builds build/diffattn; `make test` runs the
# suite twice, the optimised build, then an ASan+UBSan build. The optimised
# build's suite includes the numeric tests with the scalar kernels forced and,
# under qemu-x86_64 -cpu Haswell, on an emulated CPU without AVX-512, and an
# install into a temporary prefix that examples/ build against.
JOBS ?= $(shell nproc)
# Tests run JOBS at a time: most are one process (node, python, a server and
# its client) that cannot fill the cores alone; each takes its own temporary
# folder and a free port.
CTEST = ctest --output-on-failure -j $(JOBS)
# The reference tokenizers' ids (node), computed once for both builds' suites (tests/ref_cache_lib.sh)
export DA_REF_CACHE ?= $(CURDIR)/build/ref-cache

.PHONY: all test test-fast test-asan demo clean fuzz

all:
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build -j $(JOBS)

build-asan/CMakeCache.txt:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDA_SANITIZE=ON >/dev/null

test-fast: all
	cd build && $(CTEST)

test-asan: build-asan/CMakeCache.txt
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 $(CTEST)

test: all test-asan
	cd build && $(CTEST)

# `make fuzz`: every libFuzzer target of tests/fuzz (or FUZZ_TARGETS) for
# FUZZ_SECONDS each on one core, FUZZ_JOBS targets at a time, built with clang
# and ASan + UBSan in build-fuzz; prints executions, coverage and crashes per target.
FUZZ_SECONDS ?= 600
FUZZ_JOBS ?= 1
FUZZ_TARGETS ?= $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
fuzz:
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDA_SANITIZE=ON \
	  -DDA_FUZZ=ON -DDA_MPI=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	FUZZ_JOBS=$(FUZZ_JOBS) bash tests/fuzz/run_fuzz.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

demo: all
	bash tools/demo.sh

clean:
	rm -rf build build-asan build-fuzz
