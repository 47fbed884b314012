# hpod: thin entry points. CMake builds, ctest tests; this file only wires them.
#   make             install missing Debian packages, build
#   make test        ... and run every test (unit, e2e, a short fuzz run)
#   make quickstart  the seed's whole journey: install, start hpodd, a 1+4 Slurm cluster,
#                    data, an --auto-resume training job through a node failure
#   make quickstart-down  delete the quickstart's cluster and stop its hpodd
#   make install     install into $(PREFIX) (bin/, lib/hpod/, share/hpod/)
#   make package     Debian packages hpod-agent and hpod in $(BUILD)/packages, checked
#   make corpus      the real training data (KJV + Austen from Debian packages) in build/data
#   make api-model   regenerate the API model and its docs from the botocore python3 imports
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= $(or $(HPOD_PREFIX),/usr/local)
BUILD_TYPE ?= RelWithDebInfo

.PHONY: all deps build build-installables test unit e2e fuzz quickstart quickstart-down install package corpus bench api-model clean

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# Only what `make install` puts in $(PREFIX): the programs, the SPANK plugin, the
# fake NVML and the console; no test binaries (CMakeLists.txt: hpod_installables).
build-installables: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS) --target hpod_installables

# Every ctest test: unit, e2e, rules, and a short libFuzzer run on the request
# decoder and the SigV4 parser (fuzz_short, beside the e2e tests).
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 900

unit: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -L unit

e2e: build
	cd $(BUILD) && ctest --output-on-failure -L e2e

fuzz: build
	./scripts/fuzz.sh 600

# The quickstart installs into $(PREFIX) itself (HPOD_PREFIX), so that nodes find
# hpod-train and hpod-data on their PATH; settings: scripts/quickstart.py's header.
quickstart: build-installables
	HPOD_PREFIX=$(PREFIX) python3 scripts/quickstart.py up

quickstart-down:
	HPOD_PREFIX=$(PREFIX) python3 scripts/quickstart.py down

install: build-installables
	cmake --install $(BUILD) --prefix $(PREFIX)

# cpack over what `make install` installs, plus the units and Debian's files
# (packaging/); then contents, dependencies and lintian (scripts/check-packages.sh).
package: build-installables
	./scripts/check-packages.sh $(BUILD)

corpus: build
	./scripts/install-deps.sh --corpus
	./scripts/corpus.sh

bench: build
	./scripts/install-deps.sh --bench
	./bench/run.sh

# After a botocore upgrade (pip install -U botocore): the compiled-in model
# (src/api/sagemaker_cluster_model.json), the operations' documentation extract,
# then a build and docs/reference/ from it. Review `git diff` and run `make test`.
api-model:
	python3 scripts/gen-api-model.py > src/api/sagemaker_cluster_model.json.new
	mv src/api/sagemaker_cluster_model.json.new src/api/sagemaker_cluster_model.json
	python3 scripts/gen-docs-reference.py --refresh-docs
	$(MAKE) build
	python3 scripts/gen-docs-reference.py --build $(BUILD)

clean:
	rm -rf $(BUILD) build-fuzz
