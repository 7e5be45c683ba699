# sitegate: `make run` starts the demo site, `make test` runs every test.
# Both install what they need on a fresh machine (npm ci; apt-get as root for the tools).
SHELL := /bin/bash
.DEFAULT_GOAL := help
APT_TOOLS := socat mosquitto mbpoll openssl chromium systemd
NODE_TEST_FLAGS ?= --test-concurrency=2 --test-timeout=120000
TEST_FILES = $(shell find dist/test -name '*.test.js' | sort)

.PHONY: help setup deps build run test unit integration coverage bench soak sim clean bundle fuzz

help:
	@echo "make run    build and start the demo site (simulator + gateway + partner sink)"
	@echo "make test   install what is needed, build, run every test"
	@echo "make coverage  run every test under V8 coverage; line and branch figures per folder, fails under the floors"
	@echo "make bench  run the benchmarks (BENCH_QUICK=1 for a short run)"
	@echo "make soak   run the 50-device site SOAK_MIN minutes (60); print RSS and heap slope"
	@echo "make sim    start the bench simulator with the demo scenario"
	@echo "make bundle build a signed release bundle (BUNDLE_KEY, BUNDLE_ARCH, BUNDLE_VERSION, BUNDLE_NODE_MODULES)"
	@echo "make fuzz   fuzz a live daemon's API, token endpoint and status page (FUZZ_QUICK=1 for a short run)"
	@echo "make clean  remove build output and var/"

# Debian tools the tests and the demo use; installed when missing and running as root.
deps:
	@missing=""; for t in socat mosquitto mbpoll openssl chromium systemd-analyze; do command -v $$t >/dev/null || [ -x /usr/sbin/$$t ] || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_TOOLS) >/dev/null; \
	  else echo "missing tools:$$missing (run as root or: sudo apt-get install $(APT_TOOLS))"; exit 1; fi; \
	fi

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

setup: deps node_modules/.installed

build: node_modules/.installed
	npx --no-install tsc -p tsconfig.json
	@chmod +x dist/src/cli.js $(wildcard dist/hw-sim/cli.js)

run: setup build
	node dist/test/support/demo.js

test: setup build
	node --test $(NODE_TEST_FLAGS) $(TEST_FILES)

unit: build
	node --test $(NODE_TEST_FLAGS) $(shell find dist/test/unit -name '*.test.js' | sort)

integration: setup build
	node --test $(NODE_TEST_FLAGS) $(shell find dist/test/integration -name '*.test.js' | sort)

# Every test with NODE_V8_COVERAGE set, so the daemons and CLI runs the tests spawn count
# too; then line and branch figures per folder of dist/src (test/support/coverage.ts) and a
# non-zero exit when a floor is not met (LINE:BRANCH %, set a little under the measured figures).
COVERAGE_DIR := var/coverage
COVERAGE_FLOORS ?= src/dispatch=95:78 src/uplink=96:78 src/update=93:48
coverage: setup build
	rm -rf $(COVERAGE_DIR) && mkdir -p $(COVERAGE_DIR)/raw
	rc=0; NODE_V8_COVERAGE=$(abspath $(COVERAGE_DIR))/raw node --test $(NODE_TEST_FLAGS) $(TEST_FILES) || rc=$$?; \
	node dist/test/support/coverage.js $(COVERAGE_DIR)/raw $(COVERAGE_FLOORS) || rc=1; exit $$rc

bench: setup build
	node dist/test/bench/run.js

# The 50-device site under the unit's node flags for SOAK_MIN minutes (default 60): prints
# the RSS and heap slopes in MiB/hour (a leak shows as a number) and where the memory is.
SOAK_MIN ?= 60
soak: setup build
	SOAK_MIN=$(SOAK_MIN) node dist/test/bench/soak.js

sim: setup build
	mkdir -p var
	node dist/hw-sim/cli.js --scenario hw-sim/scenarios/demo-site.yaml

# A signed over-the-air release bundle: dist/src + production node_modules for one arch.
# Without BUNDLE_KEY a development key pair is made in var/update-keys/ (trust its .pub only on bench boxes).
BUNDLE_KEY ?= var/update-keys/sitegate-update.key
BUNDLE_ARCH ?= $(shell node -p process.arch)
BUNDLE_VERSION ?= $(shell node -p 'require("./package.json").version')
BUNDLE_OUT ?= var/bundle/sitegate-$(BUNDLE_VERSION)-linux-$(BUNDLE_ARCH).bundle

bundle: build
	@test -f $(BUNDLE_KEY) || [ "$(BUNDLE_KEY)" != var/update-keys/sitegate-update.key ] || node dist/src/cli.js update keygen --out var/update-keys
	node dist/src/cli.js update bundle --key $(BUNDLE_KEY) --out $(BUNDLE_OUT) --arch $(BUNDLE_ARCH) --version $(BUNDLE_VERSION) $(if $(BUNDLE_NODE_MODULES),--node-modules $(BUNDLE_NODE_MODULES))

# At least 20,000 mutated requests against `sitegate run` (the unit's node flags) from
# loopback; one summary row; fails on any 5xx, a crash, or event-loop lag p99 >= 50 ms.
fuzz: setup build
	node dist/test/fuzz/api.fuzz.js

clean:
	rm -rf dist var
