# Thin wrapper over CMake. `make` builds build/diffattn; `make test` runs the
# suite twice, the optimised build, then an ASan+UBSan build, and the numeric
# kernel tests once more built for AVX2 only (-march=haswell), so that the
# AVX2 paths most CPUs take are checked on an AVX-512 machine too.
JOBS ?= $(shell nproc)

.PHONY: all test test-fast test-asan test-avx2 demo clean fuzz

all:
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build -j $(JOBS)

build-asan/CMakeCache.txt:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDA_SANITIZE=ON >/dev/null

test-fast: all
	cd build && ctest --output-on-failure

test-asan: build-asan/CMakeCache.txt
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure

AVX2_TESTS = test_gradcheck test_flash test_parity test_overfit test_quant
test-avx2:
	@if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then \
	  cmake -S . -B build-avx2 -DCMAKE_BUILD_TYPE=Release -DDA_NATIVE=OFF -DCMAKE_C_FLAGS=-march=haswell >/dev/null && \
	  cmake --build build-avx2 -j $(JOBS) --target $(AVX2_TESTS) && \
	  cd build-avx2 && ctest --output-on-failure -R '^($(shell echo $(AVX2_TESTS) | tr ' ' '|'))$$'; \
	else echo "test-avx2: this CPU has no AVX2 + FMA; skipped"; fi

test: all test-asan test-avx2
	cd build && ctest --output-on-failure

# `make fuzz`: every libFuzzer target of tests/fuzz (or FUZZ_TARGETS) for
# FUZZ_SECONDS each, one after another on one core, built with clang and
# ASan + UBSan in build-fuzz; prints executions, coverage and crashes per target.
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
fuzz:
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDA_SANITIZE=ON \
	  -DDA_FUZZ=ON -DDA_MPI=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	bash tests/fuzz/run_fuzz.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

demo: all
	bash tools/demo.sh

clean:
	rm -rf build build-asan build-avx2 build-fuzz
