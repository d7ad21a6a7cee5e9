# rolloutmesh build, test and run targets. `make help` lists them.

SHELL := /bin/bash
.DEFAULT_GOAL := help

MODULES  := proto serverkit services/vmmanager services/coordinator services/runner \
            services/modelgateway services/storage guest/desktopd cli
PKGS     := $(addsuffix /...,$(addprefix ./,$(MODULES)))
SERVICES := vmmanager coordinator runner modelgateway storage
TOOLS    := .bin
export PATH := $(CURDIR)/$(TOOLS):$(PATH)

GO        ?= go
# One build configuration for every Go build the targets run, their tests'
# own `go build`s of the binaries included (they inherit GOFLAGS): static
# (the pure-Go DNS resolver and user lookup, so nothing links libc), paths
# trimmed, as the FROM-scratch images need. Before, vet, the tests' builds
# and bin/ compiled every package once with cgo and build-static once more
# without it: 3.6 of the 58 minutes of .ci/run on the 2-core machine. The
# race detector's test builds are a configuration of their own either way.
STATIC_TAGS := netgo,osusergo
export GOFLAGS := $(strip $(GOFLAGS) -trimpath -tags=$(STATIC_TAGS))
TESTFLAGS ?= -race -count=1 -timeout 25m
IMAGE_TAG ?= dev
COMPOSE   ?= docker-compose -p rolloutmesh

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

## --- code generation and checks -------------------------------------------

$(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/grpcurl: tools/go.mod tools/go.sum
	cd tools && GOWORK=off $(GO) build -o ../$(TOOLS)/ github.com/bufbuild/buf/cmd/buf \
		google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc \
		github.com/fullstorydev/grpcurl/cmd/grpcurl

# kustomize renders deploy/k8s as `kubectl kustomize` does (no kubectl in
# Debian 12); its own install keeps its dependencies out of tools/go.mod.
KUSTOMIZE_VERSION := v5.7.1
$(TOOLS)/kustomize:
	GOBIN=$(CURDIR)/$(TOOLS) GOWORK=off $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

.PHONY: tools
tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/grpcurl $(TOOLS)/kustomize ## Build the pinned tools (buf, protoc plugins, grpcurl, kustomize) into .bin

.PHONY: generate
generate: tools ## Regenerate Go (and Python) code from proto/
	buf generate
	scripts/gen-python.sh clients/python

.PHONY: check
check: tools ## Fail on stale generated code, buf lint, gofmt, go vet, Kubernetes manifests that do not render
	buf lint
	@kustomize build deploy/k8s >/dev/null || { echo "deploy/k8s does not render (kustomize build)"; exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
		buf generate --output $$tmp && \
		diff -r -x '*.proto' $$tmp/proto/rolloutmesh proto/rolloutmesh >/dev/null || \
		{ echo "generated Go code is stale: run make generate"; exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
		scripts/gen-python.sh $$tmp && \
		diff -r -x __pycache__ $$tmp/rolloutmesh/v1 clients/python/rolloutmesh/v1 >/dev/null || \
		{ echo "generated Python code is stale: run make generate"; exit 1; }
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) mod verify >/dev/null) || { echo "go mod verify failed in $$m"; exit 1; }; done

## --- build -----------------------------------------------------------------

.PHONY: build
build: ## Build every binary into bin/
	@mkdir -p bin
	$(GO) build -o bin/ $(foreach s,$(SERVICES),./services/$(s)/cmd/$(s)) ./services/modelgateway/cmd/fakellm \
		./guest/desktopd/cmd/desktopd ./cli/cmd/rollout

.PHONY: build-static
build-static: ## Build static binaries (no libc) into bin/static/ for images
	@mkdir -p bin/static
	$(GO) build -ldflags '-s -w' -o bin/static/ \
		$(foreach s,$(SERVICES),./services/$(s)/cmd/$(s)) ./services/modelgateway/cmd/fakellm ./guest/desktopd/cmd/desktopd
	@for f in bin/static/*; do \
		if readelf -l "$$f" | grep -q INTERP; then echo "$$f is dynamically linked: a FROM-scratch image cannot run it"; exit 1; fi; \
	done

## --- the main job ------------------------------------------------------------

DEMO_FLAGS ?= --num-rollouts 4 --num-vms 2 --group-size 2

.PHONY: demo
demo: ## The main job: a rollout of the bundled tasks (desktop, math, py) on the embedded mesh
	scripts/install-deps.sh
	$(MAKE) --no-print-directory build
	bin/rollout run --data examples/tasks --output-dir results $(DEMO_FLAGS)

## --- tests -----------------------------------------------------------------

.PHONY: test
test: test-deps test-go test-python ## Run every test (installs and starts what they need first)

.PHONY: test-deps
test-deps: ## Install the Debian packages, pinned tools and desktop image the tests need
	scripts/install-deps.sh
	$(MAKE) --no-print-directory tools guest-image guest-qcow2

# The viewer's browser tests keep their page screenshots here.
VIEWER_ARTIFACTS ?= $(CURDIR)/artifacts/viewer

# The Go tests find PostgreSQL and the S3 server through environment variables
# that these scripts print; a developer without root gets those tests skipped
# (CI=true makes them fail instead).
.PHONY: test-go
test-go: ## Run every Go module's tests (starts PostgreSQL, builds the S3 server); viewer screenshots go to artifacts/viewer
	eval "$$(scripts/start-postgres.sh || echo 'echo "warning: PostgreSQL not started" >&2')"; \
	test_servers_env=$$(scripts/build-test-servers.sh) || exit 1; eval "$$test_servers_env"; \
	status=0; \
	ROLLOUTMESH_VIEWER_ARTIFACTS=$(VIEWER_ARTIFACTS) $(GO) test $(TESTFLAGS) $(PKGS) || status=$$?; \
	echo "modelgateway's tests again, its HTTP front on engine goroutines (the default is the event loop)"; \
	(cd services/modelgateway && MODELGATEWAY_TEST_HTTP_ENGINE=goroutines $(GO) test $(TESTFLAGS) .) || status=$$?; \
	echo "modelgateway's tests again, its gRPC front on engine goroutines, grpc-go's server (the default is the event loop)"; \
	(cd services/modelgateway && MODELGATEWAY_TEST_GRPC_ENGINE=goroutines $(GO) test $(TESTFLAGS) .) || status=$$?; \
	echo "viewer page screenshots (headless Chromium): $(VIEWER_ARTIFACTS)"; exit $$status

.PHONY: test-python
test-python: build ## Test the Python client and the example training loop against `rollout up`
	scripts/test-python.sh

# An execution count, not a duration: a duration budget trips a race in Go
# 1.26's fuzz coordinator that fails the run with "context deadline exceeded"
# at the deadline though no input failed (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 200000x
# The file-format readers (zip packages, images, EPUB, and vlcrc, whose
# checks run Python patterns with a 2 s match limit) cost a millisecond or
# more per input: a smaller count keeps `make fuzz` within minutes.
FUZZTIME_FILES ?= 20000x
# Fuzz targets, package and target name pairs (a third field overrides
# FUZZTIME). The parsers and encoders: everything that reads model output,
# task files or a guest's files, whose test binaries are small.
FUZZ_PARSERS := services/runner/internal/actionspace/computer13:FuzzParse \
	services/runner/internal/actionspace/pyautogui:FuzzParse \
	services/runner/internal/actionspace/uitars:FuzzParse \
	services/runner/internal/actionspace/claude:FuzzParse \
	services/runner/internal/actionspace/toolcalls:FuzzParse \
	services/runner/internal/osworld:FuzzParseTask \
	services/runner/internal/taskfile:FuzzParse \
	services/runner/internal/env/math:FuzzEval \
	services/runner/internal/metrics:FuzzParseNumber \
	services/runner/internal/action:FuzzParseScreen \
	services/modelgateway:FuzzAppendEscaped \
	services/modelgateway:FuzzChatAnswer \
	services/modelgateway/internal/openaihttp:FuzzReadRequest \
	services/modelgateway/internal/fakellm:FuzzDecodeChat \
	guest/desktopd/internal/pyautogui:FuzzCompile \
	services/coordinator/internal/tasksource:FuzzParseFile \
	services/runner/internal/osworld/metric:FuzzParsePrefs \
	services/runner/internal/osworld/metric:FuzzParseFilters \
	services/runner/internal/osworld/metric/media:FuzzReadVLCConfig:$(FUZZTIME_FILES) \
	services/runner/internal/osworld/metric/media:FuzzVLCStatus \
	services/runner/internal/osworld/metric/media:FuzzMP3Tags \
	services/runner/internal/osworld/metric/media:FuzzReadPPM \
	services/runner/internal/osworld/metric/media:FuzzLxmlPretty \
	services/runner/internal/osworld/metric/media:FuzzDecodeImage:$(FUZZTIME_FILES) \
	services/runner/internal/osworld/metric/media:FuzzEPUB:$(FUZZTIME_FILES) \
	services/runner/internal/osworld/metric/slides/pptx:FuzzReadPresentation:$(FUZZTIME_FILES) \
	services/runner/internal/osworld/metric/table:FuzzCompareTable:$(FUZZTIME_FILES) \
	services/runner/internal/osworld/metric/docs/docx:FuzzReadDocument:$(FUZZTIME_FILES) \
	services/runner/internal/osworld/metric/docs/docx:FuzzDocumentBody
# Every service's request handling: requests built from fuzz input, sent
# over an in-process gRPC connection through the real interceptor chain,
# the gateway's HTTP front and desktopd's HTTP API. Each links a whole
# service with coverage instrumentation, a minute or more per package on
# two cores before the first input runs.
FUZZ_SERVERS := services/coordinator:FuzzCoordinatorRequests \
	services/coordinator:FuzzWorkStream \
	services/vmmanager:FuzzRequests \
	services/runner:FuzzRequests \
	services/modelgateway:FuzzGRPC \
	services/modelgateway:FuzzHTTPFront \
	services/storage:FuzzStorageRequests \
	guest/desktopd/internal/api:FuzzAPI
FUZZ_TARGETS := $(FUZZ_PARSERS) $(FUZZ_SERVERS)

# scripts/fuzz.sh builds each package's instrumented test binary once and
# runs all of its targets from it.
.PHONY: fuzz
fuzz: ## Run every fuzz target (parsers and every service's request handling) for FUZZTIME executions (default 200000x) each
	scripts/fuzz.sh $(FUZZTIME) $(FUZZ_TARGETS)

.PHONY: fuzz-parsers
fuzz-parsers: ## Run the parsers' and file readers' fuzz targets only
	scripts/fuzz.sh $(FUZZTIME) $(FUZZ_PARSERS)

.PHONY: smoke
smoke: build ## Start each binary on its default ports, check grpcurl/metrics, SIGTERM it
	scripts/smoke.sh

## --- images and deployment -------------------------------------------------

.PHONY: images
images: build-static ## Build FROM-scratch images rolloutmesh/<service>:dev (no registry needed)
	scripts/build-images.sh $(IMAGE_TAG) $(SERVICES) fakellm

.PHONY: up
up: images guest-image ## Start the mesh with docker compose (deploy/compose.yaml)
	$(COMPOSE) -f deploy/compose.yaml up -d
	COMPOSE="$(COMPOSE)" scripts/compose-wait.sh deploy/compose.yaml 180

.PHONY: e2e
e2e: images guest-image ## End-to-end tests of the compose deployment: the README's remote rollout at 100 %, py tasks in a runner pod's sandbox, a killed model backend, and the chaos test (kills every service once mid-rollout)
	@status=0; E2E_COMPOSE="$(COMPOSE)" $(GO) test -tags e2e,$(STATIC_TAGS) -count=1 -timeout 30m -v ./cli/e2e/... || status=$$?; \
		$(COMPOSE) -f deploy/compose.yaml down --remove-orphans >/dev/null 2>&1 || true; exit $$status

.PHONY: e2e-osworld
e2e-osworld: guest-image-full ## One OSWorld-format task per domain end to end on rolloutmesh/desktop:full (docker VMs, real apps, scripted model)
	$(GO) test -tags osworld,$(STATIC_TAGS) -count=1 -timeout 20m -v -run TestOSWorldFull ./cli/e2e/...

.PHONY: e2e-desktop
e2e-desktop: guest-image guest-qcow2 ## Fresh-VM episodes of the xterm and Mousepad typing tasks: 100 each on process and docker VMs, 20 on qemu VMs; every one must succeed
	$(GO) test -tags desktop,$(STATIC_TAGS) -count=1 -timeout 30m -v -run TestDesktopFreshVMs ./cli/e2e/...

.PHONY: down
down: ## Stop the compose mesh and remove its containers; its volumes (stored rollouts, databases) are kept
	$(COMPOSE) -f deploy/compose.yaml down --remove-orphans

.PHONY: down-volumes
down-volumes: ## Stop the compose mesh and remove its containers AND its volumes (every stored rollout and database)
	$(COMPOSE) -f deploy/compose.yaml down --remove-orphans --volumes

## --- benchmarks (figures go to docs/benchmarks.md) ---------------------------

.PHONY: bench
bench: ## Every benchmark twice in sequence (on a quiet machine), then the goals table of docs/benchmarks.md rewritten from their goal lines
	scripts/bench.sh

.PHONY: bench-desktopd
bench-desktopd: ## Screenshot and action latency of desktopd on Xvfb (1280x720, 1920x1080)
	cd guest/desktopd && $(GO) run ./cmd/benchdesktopd

.PHONY: bench-vmmanager
bench-vmmanager: ## Lease hand-off over gRPC and in-process, VM utilisation vs the bound, reset time of the process, docker and qemu providers
	cd services/vmmanager && $(GO) run ./cmd/benchvmmanager

# The kubernetes provider against a real kube-apiserver (built by
# scripts/build-test-servers.sh): a pool of 1,024 pods, the kubelet's part in
# a child process, so the CPU figures are vmmanager's own.
K8S_BENCHTIME ?= 2048x
.PHONY: bench-k8s
bench-k8s: ## vmmanager's own CPU and latency per pod event, per lease (acquire, release, reset to a new pod) and per health check, 1,024 pods on a real kube-apiserver
	test_servers_env=$$(scripts/build-test-servers.sh) || exit 1; eval "$$test_servers_env"; \
	cd services/vmmanager && $(GO) test -count=1 -run '^$$' -bench . -benchtime $(K8S_BENCHTIME) -timeout 60m ./internal/provider/kubernetes

.PHONY: bench-gateway
bench-gateway: ## Gateway added latency vs fakellm direct vs nginx; sticky vs round-robin TTFT
	cd services/modelgateway && $(GO) run ./cmd/benchgateway

.PHONY: bench-storage
bench-storage: ## AppendSteps steps/s against the disk's durable rate; ListEpisodes/GetStats latency at scale; viewer page times
	cd services/storage && $(GO) run ./cmd/benchstorage
	cd services/storage && $(GO) run ./cmd/benchviewer

.PHONY: bench-osworld-eval
bench-osworld-eval: ## OSWorld metric evaluation time (compare_table, pptx, docx, pdfs, images, audios, videos) on files of realistic size
	cd services/runner && $(GO) run ./cmd/benchosworldeval

.PHONY: bench-osworld-setup
bench-osworld-setup: guest-image-full ## OSWorld task setup time on the full guest (Calc, Chrome tabs, VLC), cold and warm download cache
	cd services/runner && $(GO) run ./cmd/benchosworldsetup

.PHONY: bench-coordinator
bench-coordinator: ## Episodes/min of the coordinator alone (simulated runners), and of a mesh of math episodes with -mesh
	cd services/coordinator && $(GO) run ./cmd/benchcoordinator

.PHONY: bench-mesh
bench-mesh: ## Episodes/min, steps/s, CPU per step per service and VM busy share of the mesh as separate processes, N = 64, 256, 1,024 simulated guests leased through vmmanager
	cd services/coordinator && $(GO) run ./cmd/benchmesh

## --- guest image -------------------------------------------------------------

.PHONY: guest-image
guest-image: ## Build the desktop guest image rolloutmesh/desktop:dev with debootstrap (root; skipped when up to date)
	deploy/guest/build-desktop-image.sh rolloutmesh/desktop:$(IMAGE_TAG)

.PHONY: guest-qcow2
guest-qcow2: guest-image ## Build the QEMU desktop guest .cache/guest/desktop.qcow2 (+ .vmlinuz, .initrd) from rolloutmesh/desktop:dev and Debian's kernel (root; skipped when up to date)
	IMAGE=rolloutmesh/desktop:$(IMAGE_TAG) deploy/guest/build-qcow2.sh

.PHONY: guest-image-full
guest-image-full: guest-image ## Build rolloutmesh/desktop:full from rolloutmesh/desktop:dev: the desktop guest with Chromium, LibreOffice, GIMP, VLC, Thunderbird for OSWorld's tasks (root; VSCODE_DEB=code.deb adds VS Code)
	deploy/guest/build-desktop-image.sh --full rolloutmesh/desktop:full

.PHONY: desktopd-scratch
desktopd-scratch: ## Build rolloutmesh/desktopd-scratch:dev (desktopd alone, no display; for fast VM lifecycle tests)
	deploy/guest/build-scratch-image.sh rolloutmesh/desktopd-scratch:$(IMAGE_TAG)
