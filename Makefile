# The newcomer's two commands: `make demo` and `make test`. Both install any
# missing Debian packages first (scripts/deps.sh), then configure and build.
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CMAKE_FLAGS ?=

.PHONY: all deps build demo test check test-matrix bench fuzz stress install clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)

test: deps
	@scripts/test.sh

# The quick path for one change: the normal build, the unit tests and the
# end-to-end tests whose names match the regex AREA (all by default).
check: deps
	@BUILD=$(BUILD) AREA='$(value AREA)' scripts/test.sh check

# The normal build's tests (AREA as for check) on one CPU, beside a CPU
# hog on every CPU, without perf events, under a seccomp filter and under
# a ulimit -v; a table of the results per environment (not in CI: five
# runs of the tests).
test-matrix: deps
	@BUILD=$(BUILD) AREA='$(value AREA)' scripts/test.sh matrix

bench: build
	@scripts/deps.sh bench
	@scripts/bench.sh $(BUILD)

# The stress suite for a minute under ASan+UBSan and under TSan.
stress: deps
	@STRESS_SECONDS=$${STRESS_SECONDS:-60} STRESS_ONLY=1 scripts/test.sh asan tsan

fuzz: deps
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-300} scripts/test.sh fuzz

install: build
	@cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
