# Everything runs from a local virtual environment (.venv) and local npm tools (.tools), so a
# fresh machine needs only python3 (with venv and pip) and node/npm.

PYTHON      ?= python3
VENV        := .venv
BIN         := $(VENV)/bin
VENV_STAMP  := $(VENV)/.installed
TOOLS       := .tools
BUF_VERSION := 1.75.0
BUF         := $(TOOLS)/node_modules/.bin/buf
GRPC_JS     := 1.14.7
PROTO_LOADER := 0.8.1
# The gateway's gRPC-Web client in the tests: Connect's web transport, the messages made at run
# time from the descriptor set (nothing generated).
CONNECT     := 2.3.0
# protoc-gen-es generates the typed TypeScript client (make clients); protobuf-es is its runtime
# and the gateway test's messages.
PROTOBUF_ES := 2.17.0
# tsc type-checks the typed example against the generated declarations (tests/api/test_contract.py).
TYPESCRIPT  := 5.9.3
TYPES_NODE  := 20.19.43
# buf lints the proto; grpc-js and proto-loader are the tests' client in another language.
TOOLS_STAMP := $(TOOLS)/.installed-buf-$(BUF_VERSION)-grpc-js-$(GRPC_JS)-proto-loader-$(PROTO_LOADER)-connect-$(CONNECT)-es-$(PROTOBUF_ES)-ts-$(TYPESCRIPT)
HOST        ?= 127.0.0.1
PORT        ?= 50051
IMAGE       ?= remigio-referee:latest
GATEWAY_IMAGE ?= remigio-gateway:latest
# The package's version (referee/__init__.py) and the commit, for the image's OCI labels.
VERSION     := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' referee/__init__.py)
REVISION    := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
PYTEST_ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help venv .venv buf bench-extra compile serve gateway browser h2load test test-fast lint format protos clients bench soak docker release image-proof clean distclean

help: ## list the targets
	@grep -E '^[a-z][a-z0-9 .-]*:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

# Re-installed whenever pyproject.toml changes.
$(VENV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray]'
	touch $@

# The ray extra too: the cluster tier (tests/test_cluster.py) runs batches on a local Ray cluster.
venv .venv: $(VENV_STAMP) ## create .venv and install the project with its dev and ray extras

# RLCard, for bench.rlcard only (the bench extra): never needed by the package or the tests.
BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(VENV_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

bench-extra: $(BENCH_STAMP) ## install the bench extra (RLCard, for bench.rlcard) into .venv

$(TOOLS_STAMP):
	npm install --prefix $(TOOLS) --no-audit --no-fund --loglevel=error \
		@bufbuild/buf@$(BUF_VERSION) @grpc/grpc-js@$(GRPC_JS) @grpc/proto-loader@$(PROTO_LOADER) \
		@bufbuild/protobuf@$(PROTOBUF_ES) @connectrpc/connect@$(CONNECT) @connectrpc/connect-web@$(CONNECT) \
		@bufbuild/protoc-gen-es@$(PROTOBUF_ES) typescript@$(TYPESCRIPT) @types/node@$(TYPES_NODE)
	$(BUF) --version
	touch $@

buf: $(TOOLS_STAMP) ## install buf (and the tests' Node.js gRPC client) into .tools

# The hot modules (the review's measure, the search engine, the record lane) compiled with mypyc
# (referee/game/compiled.py): built once per version of the sources into the user's cache, and
# used only for the sources they were built from. A machine without a C compiler keeps the Python
# modules, which give the same answers.
compile: $(VENV_STAMP) ## compile the hot modules with mypyc (reviews and record batches in about 2/3 to 4/5 of the time)
	-$(BIN)/python -c 'from referee.game.compiled import main; raise SystemExit(main())'

serve: $(VENV_STAMP) ## run the referee on HOST:PORT (default 127.0.0.1:50051)
	$(BIN)/remigio-referee serve --host $(HOST) --port $(PORT)

GATEWAY_PORT ?= 8080
GATEWAY_ARGS ?=

gateway: $(VENV_STAMP) ## run the referee (PORT) behind Envoy on HOST:GATEWAY_PORT (8080): JSON, gRPC-Web, gRPC and the desk (/desk)
	$(BIN)/python -m gateway run --listen $(HOST):$(GATEWAY_PORT) --upstream 127.0.0.1:$(PORT) $(GATEWAY_ARGS)

# A real browser for the gateway's browser test: Debian's chromium, installed when this runs as
# root with apt (as CI does); elsewhere the test says why it skips.
browser: ## install Debian's chromium for the browser test, where apt-get and root allow
	@if command -v chromium >/dev/null 2>&1; then echo "chromium: $$(command -v chromium)"; \
	elif ! command -v apt-get >/dev/null 2>&1; then echo "browser: no apt-get here; the browser test will skip"; \
	elif [ "$$(id -u)" != 0 ]; then echo "browser: not root; the browser test will skip (install chromium to run it)"; \
	else apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
		|| echo "browser: apt-get could not install chromium; the browser test will skip"; fi

# The load generator of bench.floor: Debian's nghttp2-client (h2load), installed when this runs as
# root with apt; elsewhere bench.floor drives the load with bench.h2client and says so.
h2load: ## install Debian's h2load (nghttp2-client) for bench.floor, where apt-get and root allow
	@if command -v h2load >/dev/null 2>&1; then echo "h2load: $$(command -v h2load)"; \
	elif ! command -v apt-get >/dev/null 2>&1; then echo "h2load: no apt-get here; bench.floor will use bench.h2client"; \
	elif [ "$$(id -u)" != 0 ]; then echo "h2load: not root; bench.floor will use bench.h2client (install nghttp2-client to use it)"; \
	else apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nghttp2-client >/dev/null \
		|| echo "h2load: apt-get could not install nghttp2-client; bench.floor will use bench.h2client"; fi

# Bytecode, and pytest's rewritten test modules, are cached (__pycache__, ignored by git) even where
# the environment turns caching off: else every worker and every server process the tests start
# compiles every module again (about 8 s of CPU per pytest process).
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -ra

# Two runs. First every tier on four workers: the tests that compute fill both cores while those
# that wait on server processes (and Ray clusters) wait beside them; three left the cores idle a
# quarter of the time (a process or hostile module stays on one worker, so its servers start once). Then the tests that bound a latency or a rate (marked alone), one at
# a time, so their bounds measure the server, not a neighbour test.
# The tools (npm), the browser (apt) and the compiled modules (one core of mypyc and gcc) are made
# side by side: two wait on the network while the third computes.
test: $(VENV_STAMP) ## run every tier of the tests (slow ones deselected)
	$(MAKE) --jobs=3 --no-print-directory $(TOOLS_STAMP) browser compile
	$(PYTEST) -n 4 --dist loadgroup -m 'not alone and not slow' $(PYTEST_ARGS)
	$(PYTEST) -m 'alone and not slow' $(PYTEST_ARGS)

test-fast: $(VENV_STAMP) ## the unit tier only: the domain, the adapter and the command line (no server)
	$(PYTEST) -n 2 -m 'unit and not slow' $(PYTEST_ARGS)

lint: $(VENV_STAMP) $(TOOLS_STAMP) ## ruff, buf lint and format check, stale generated code, hadolint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BUF) lint
	$(BUF) format --diff --exit-code
	$(BIN)/python scripts/gen_protos.py --check
	$(BIN)/python -m gateway openapi --check
	$(BIN)/hadolint --failure-threshold warning Dockerfile gateway/Dockerfile

format: $(VENV_STAMP) ## format the code and apply ruff's safe fixes
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

protos: $(VENV_STAMP) ## regenerate referee/_gen/ and docs/openapi.yaml from protos/
	$(BIN)/python scripts/gen_protos.py
	$(BIN)/python -m gateway openapi

clients: $(TOOLS_STAMP) ## regenerate the typed TypeScript client (examples/node/gen/) from protos/ (buf.gen.yaml)
	$(BUF) generate

# Each with its default run, one at a time (about thirteen minutes on two cores); the quick forms
# are in CONTRIBUTING.md. The comparison with RLCard runs when the bench extra is installed.
bench: $(VENV_STAMP) ## run the benchmarks (linking engines, RLCard, service, attacks, dispute batches, replay)
	$(BIN)/python -m bench.solver
	@if $(BIN)/python -c 'import rlcard' 2>/dev/null; then $(BIN)/python -m bench.rlcard; \
	else echo "bench.rlcard: skipped, RLCard is not installed (make bench-extra installs it)"; fi
	$(BIN)/python -m bench.service
	$(BIN)/python -m bench.hostile
	$(BIN)/python -m bench.batch
	$(BIN)/python -m bench.replay

# 100,000 fuzzed requests against a server of two workers, ten minutes at most on two cores; it
# fails (exit status 1) when a target is missed. SOAK_ARGS: more flags (--requests, --seed, --json).
SOAK_ARGS ?=

soak: $(VENV_STAMP) ## fuzz every RPC with 100,000 mutated requests; fail on INTERNAL/UNKNOWN, restarts, growth, slow health
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

docker: ## build the referee's and the gateway's container images (needs a Docker engine)
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(GATEWAY_IMAGE) -f gateway/Dockerfile .

release: $(VENV_STAMP) ## build the sdist, wheel and image of this version into dist/ and check them
	$(BIN)/python scripts/release.py

image-proof: $(VENV_STAMP) ## build the referee's and gateway's images with podman from Debian's packages and prove they serve locked down (root)
	$(BIN)/python scripts/build_image.py

clean: ## remove build output and caches
	rm -rf build dist *.egg-info .pytest_cache .hypothesis
	find . -path ./$(VENV) -prune -o -path ./$(TOOLS) -prune -o \
		-name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean ## also remove .venv and .tools
	rm -rf $(VENV) $(TOOLS)
