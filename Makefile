# The newcomer's two commands: `make demo` and `make test`. Both install any
# missing Debian packages first (scripts/deps.sh), then configure and build.
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CMAKE_FLAGS ?=

.PHONY: all deps build demo test bench fuzz install clean

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

bench: build
	@scripts/bench.sh $(BUILD)

fuzz: deps
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-300} scripts/test.sh fuzz

install: build
	@cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
