# karpx Makefile. The two commands a newcomer needs:
#   make demo   # local control plane + EC2 simulator + karpx provisioning real pods
#   make test   # unit tests and end-to-end tests on the real control plane
#
# The control plane (kube-apiserver, kube-controller-manager, kube-scheduler,
# etcd) and kwok are built from the Go module proxy at the versions pinned in
# hack/controlplane/go.mod, hack/etcd/go.mod and KWOK_VERSION below, into
# bin/, and rebuilt only when missing or when a pin changes.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN := $(ROOT)/bin
export GOTOOLCHAIN := local
# No cgo for anything built here: only the standard library's net, os/user
# and plugin have cgo files among karpx's dependencies, and their pure-Go
# builds serve. The control plane, kwok, Karpenter's kwok provider, the
# release archives and the images were built without cgo already; with the
# host's binaries and tests built the same way, a cold `make build` and
# `make karpenter-kwok` took 421 s instead of 625 s (docs/performance.md).
export CGO_ENABLED ?= 0

KWOK_VERSION ?= v0.8.0
CONTROLLER_TOOLS_VERSION ?= v0.21.0
KUBE_VERSION := $(shell cd hack/controlplane && go list -m -f '{{.Version}}' k8s.io/kubernetes)
ETCD_VERSION := $(shell cd hack/etcd && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
# Upstream Karpenter, for the upstream-mode tests and the head-to-head
# benchmark: the version karpx's go.mod requires (go.sum verifies the module).
KARPENTER_VERSION := $(shell go list -m -f '{{.Version}}' sigs.k8s.io/karpenter)
# The real Karpenter AWS provider (bin/karpenter-aws), for test/upstream: the
# version hack/karpenter-aws/go.mod pins, read from the file so that no
# toolchain is fetched to parse the Makefile.
# KARPENTER_CRD_MODULE is the Karpenter AWS provider release whose CRDs
# karpx matches: `make generate` installs its NodePool, NodeClaim and
# NodeOverlay CRDs (Karpenter's, with the provider's karpenter.k8s.aws label
# rules; NodeOverlay so that upgrading keeps users' objects, which the
# webhook then refuses to create or change: KX203), and
# manifests/crds' TestMatchesUpstream compares every CRD with it.
KARPENTER_CRD_MODULE := github.com/aws/karpenter-provider-aws@v1.14.0
KARPENTER_AWS_VERSION := $(shell awk 'NF >= 2 && $$(NF-1) == "github.com/aws/karpenter-provider-aws" { print $$NF }' hack/karpenter-aws/go.mod)
KARPX_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

KUBE_MAJOR := $(word 1,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
KUBE_MINOR := $(word 2,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
KUBE_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(KUBE_MAJOR) \
	-X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION)

KARPX_LDFLAGS := -X github.com/karpx/karpx/plugin.Version=$(KARPX_VERSION)

# Test budget: CI has 90 minutes for everything, the control-plane build included;
# the end-to-end package (37 tests, the waiting ones E2E_PARALLEL at a time,
# on a pool of shared control planes) took 13 minutes on 2 cores at load
# average 0-5.5 (docs/performance.md).
TEST_TIMEOUT ?= 50m

# E2E_PARALLEL: how many of test/e2e's waiting scenarios (runInParallel) run
# at once, each on a control plane of the package's shared pool (as many
# members as this). ./test/e2e is named first so `go test` builds and starts
# it before the short packages, which then run beside it.
E2E_PARALLEL ?= 3

# UNIT_FLAGS: extra go test flags for `make unit`. Empty by default, so Go's
# test cache answers for every package whose code, dependencies and test
# inputs (the files and environment variables its tests read) did not
# change, and the edit-test loop links and runs only what an edit reaches.
# Linking the ~75 test binaries is ~190 s of a full run on 2 cores.
# UNIT_FLAGS=-count=1 runs every package again (220-229 s warm, 2026-11-26).
# `make test` always runs everything (-count=1).
UNIT_FLAGS ?=

# TEST_SKIP: what `make test` leaves to its own tier. The chaos suite
# (test/e2e TestChaos*: faults injected while a workload scales) runs in
# `make chaos-short`, which .ci/run runs right after `make test`: its 10
# tests were 417 of the 1,400 test-seconds of test/e2e, and `make test`
# stays within 35 minutes on a fresh 2-core machine. TEST_SKIP= runs them
# in `make test` again. The field problems P1-P5 run on the real
# Karpenter AWS provider (test/upstream TestUpstreamProblem*, each its own
# control plane, 3-8 minutes together) are their own tier too: `make
# problems-upstream`, a step of its own in .ci/run. So are the
# differential tests (test/upstream TestDifferential*: karpx and the real
# Karpenter side by side, two control planes each): `make differential`.
TEST_SKIP ?= ^TestChaos|^TestUpstreamProblem|^TestDifferential

# TEST_BUILD_FLAGS: how `make test` and `make unit` build test binaries.
# -vet=off: `make vet` runs go vet on every package (.ci/run runs it
# before the tests), so go test's own subset of vet would check the same
# code again, about a minute of CPU on a cold cache. -s -w: no symbol
# table or DWARF in test binaries (panics and failures still print whole
# stack traces, from the pclntab): linking the e2e test binary took
# 13.5-15.8 s instead of 19.5-20.1 s (warm, 2 cores, 2026-11-26).
TEST_BUILD_FLAGS ?= -vet=off -ldflags='-s -w'

CONTROLPLANE_STAMP := $(BIN)/.controlplane-$(KUBE_VERSION)
ETCD_STAMP := $(BIN)/.etcd-$(ETCD_VERSION)
KWOK_STAMP := $(BIN)/.kwok-$(KWOK_VERSION)
KARPENTER_KWOK_STAMP := $(BIN)/.karpenter-kwok-$(KARPENTER_VERSION)
KARPENTER_AWS_STAMP := $(BIN)/.karpenter-aws-$(KARPENTER_AWS_VERSION)

##@ Newcomer

.PHONY: demo
demo: tools build ## Run the demo: control plane, EC2 simulator, karpx provisioning a Deployment's pods.
	PATH="$(BIN):$$PATH" go run ./hack/demo up

.PHONY: demo-check
demo-check: ## Check a running demo as its user would: every pod Running, every command it printed working as printed.
	PATH="$(BIN):$$PATH" go run ./hack/demo check

.PHONY: demo-down
demo-down: ## Stop the demo cluster, simulator and controller.
	PATH="$(BIN):$$PATH" go run ./hack/demo down

.PHONY: test
test: tools build karpenter-kwok karpenter-aws upstream-crds ## Run unit tests and the end-to-end tests on the real control plane.
	@mkdir -p _output && rm -rf _output/scenarios.log _output/e2e-logs
	PATH="$(BIN):$$PATH" KARPX_SCENARIO_LOG=$(ROOT)/_output/scenarios.log KARPX_PREBUILT_BIN=$(BIN) KARPX_E2E_PARALLEL=$(E2E_PARALLEL) \
		go test -json -count=1 $(TEST_BUILD_FLAGS) -skip '$(TEST_SKIP)' -parallel $(E2E_PARALLEL) -timeout $(TEST_TIMEOUT) ./test/e2e ./... | $(TESTTIMES) -report $(ROOT)/_output/test-times.txt
	@echo "--- scenario figures ---" && cat _output/scenarios.log 2>/dev/null || true
	@echo "--- where the time went: _output/test-times.txt ---"

.PHONY: unit
unit: upstream-crds ## Run only the tests that need no control plane (-short), with a timing report.
	@mkdir -p _output
	go test -json $(TEST_BUILD_FLAGS) $(UNIT_FLAGS) -short ./... | $(TESTTIMES) -report $(ROOT)/_output/unit-times.txt

.PHONY: upstream-crds
upstream-crds: ## Download $(KARPENTER_CRD_MODULE) into the module cache (manifests/crds' TestMatchesUpstream reads its CRDs; no-op when cached).
	go mod download $(KARPENTER_CRD_MODULE)

# Reads `go test -json`, prints plain go test output (failing tests' logs
# only) and writes per-package and per-test wall times (hack/testtimes).
TESTTIMES := go run ./hack/testtimes

##@ Building

# CMDS: the main packages `make build` builds (.ci/run builds them one
# at a time to time each).
CMDS ?= ./cmd/...

.PHONY: build
build: ## Build karpx's binaries into bin/ (once, for this machine; the tests use them).
	go build -ldflags "$(KARPX_LDFLAGS)" -o $(BIN)/ $(CMDS)

# The builds run one after another, on purpose: the control plane and
# karpx compile 771 packages in common (hack/controlplane/go.mod pins the
# same module versions), and two go commands that start at once compile
# them twice. Built side by side (make -j3), the prerequisites of a fresh
# `make test` took about 1,410 s instead of 1,156 s (docs/performance.md).
.PHONY: tools
tools: controlplane kwok ## Build every external binary the tests and the demo need.

.PHONY: controlplane
controlplane: $(CONTROLPLANE_STAMP) $(ETCD_STAMP) ## Build kube-apiserver, kube-controller-manager, kube-scheduler and etcd into bin/.

$(CONTROLPLANE_STAMP): hack/controlplane/go.mod
	@echo "building Kubernetes $(KUBE_VERSION) control plane from the Go module proxy (about 10 minutes on 2 cores, once)"
	cd hack/controlplane && CGO_ENABLED=0 go build -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/ \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler
	rm -f $(BIN)/.controlplane-* && touch $@

.PHONY: kubectl
kubectl: ## Build kubectl $(KUBE_VERSION) into bin/ (only needed where none is installed).
	cd hack/controlplane && CGO_ENABLED=0 go build -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kubectl k8s.io/kubernetes/cmd/kubectl

$(ETCD_STAMP): hack/etcd/go.mod
	@echo "building etcd $(ETCD_VERSION) from the Go module proxy"
	cd hack/etcd && CGO_ENABLED=0 go build -ldflags "-s -w" -o $(BIN)/etcd go.etcd.io/etcd/server/v3
	rm -f $(BIN)/.etcd-* && touch $@

.PHONY: kwok
kwok: $(KWOK_STAMP) ## Build kwokctl and kwok (fake kubelet for nodes and pods) into bin/.

$(KWOK_STAMP):
	GOBIN=$(BIN) CGO_ENABLED=0 go install sigs.k8s.io/kwok/cmd/kwokctl@$(KWOK_VERSION) sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION)
	rm -f $(BIN)/.kwok-* && touch $@

.PHONY: karpenter-kwok
karpenter-kwok: $(KARPENTER_KWOK_STAMP) ## Build upstream Karpenter's kwok provider (sigs.k8s.io/karpenter/kwok, go.mod's version) into bin/karpenter-kwok.

# Built in karpx's own module, so go.mod pins the version and go.sum
# verifies it; the stamp names the version, so a bump in go.mod rebuilds.
$(KARPENTER_KWOK_STAMP):
	@echo "building Karpenter $(KARPENTER_VERSION)'s kwok provider from the Go module proxy (about a minute on 2 cores, once)"
	CGO_ENABLED=0 go build -ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$(KARPENTER_VERSION)" \
		-o $(BIN)/karpenter-kwok sigs.k8s.io/karpenter/kwok
	rm -f $(BIN)/.karpenter-kwok-* && touch $@

# KARPENTER_AWS_TOOLCHAIN: the Go toolchain for hack/karpenter-aws only.
# Its version, v1.14.3, is the newest provider release whose whole build
# the Go module proxy serves (checked 2026-11-27): v1.15.1 needs
# sigs.k8s.io/karpenter v1.15.1 and v1.15.0 needs
# aws-sdk-go-v2/service/timestreamwrite v1.43.1, both answered 403 "not
# available". Its go.mod says go 1.26.10, newer than the local 1.26.8, so
# it builds with go1.27.3 (approved for this module only; the go command
# fetches it from the module proxy, checksum-verified). The newest release
# the local toolchain builds is v1.14.0 (v1.14.1 and v1.14.2 need core
# pseudo-versions the proxy refuses); v1.14.3 is taken as the newest, as
# the separate toolchain costs no more to build: 383 s of CPU cold against
# 378 s for v1.14.0 with the local one, which shares no more compiled
# packages with karpx (docs/performance.md).
KARPENTER_AWS_TOOLCHAIN ?= go1.27.3

.PHONY: karpenter-aws
karpenter-aws: $(KARPENTER_AWS_STAMP) ## Build the real Karpenter AWS provider (hack/karpenter-aws/go.mod's version) into bin/karpenter-aws.

# A module of its own (karpx requires Karpenter core v1.13 for the kwok
# provider; the AWS provider needs its own core version): go.mod pins the
# version, go.sum verifies every module the build reads (-mod=readonly),
# the stamp names the version so a bump rebuilds, and the binary carries it
# in its build info (`go version -m bin/karpenter-aws`) and in the version
# Karpenter logs and puts in its User-Agent (operator.Version). It compiles
# into a build cache of its own, removed after the build: compiled by
# another toolchain, none of its packages serves any later build, and they
# would keep about 2.6 GiB of disk (docs/performance.md, "Disk").
$(KARPENTER_AWS_STAMP): export GOTOOLCHAIN := $(KARPENTER_AWS_TOOLCHAIN)
$(KARPENTER_AWS_STAMP): hack/karpenter-aws/go.mod hack/karpenter-aws/go.sum
	@echo "building Karpenter AWS provider $(KARPENTER_AWS_VERSION) with $(KARPENTER_AWS_TOOLCHAIN) from the Go module proxy (383-405 s of CPU: about 4 minutes on 2 idle cores, 8-13 on busy ones; once)"
	cache=$$(mktemp -d) && trap 'rm -rf "$$cache"' EXIT && \
	cd hack/karpenter-aws && GOCACHE=$$cache CGO_ENABLED=0 go build -mod=readonly \
		-ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$(patsubst v%,%,$(KARPENTER_AWS_VERSION))" \
		-o $(BIN)/karpenter-aws github.com/aws/karpenter-provider-aws/cmd/controller
	rm -f $(BIN)/.karpenter-aws-* && touch $@

$(BIN)/controller-gen:
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

##@ Releasing

# Release version: the nearest v* tag (vX.Y.Z, optionally -N-gHASH and
# -dirty); without one, v0.0.0-g<commit>, a semver pre-release as krew's
# manifest requires.
# Expanded once: the archive names and the manifest must agree even if
# HEAD moves during the build.
ifndef DIST_VERSION
DIST_VERSION := $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo v0.0.0-g$$(git rev-parse --short HEAD 2>/dev/null || echo unknown))
endif
DIST_DIR := $(ROOT)/_output/dist
DIST_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
DIST_URL ?= https://github.com/karpx/karpx/releases/download/$(DIST_VERSION)
# Byte-for-byte reproducible archives: no build paths or VCS stamps in the
# binaries, fixed owners and times in the archives.
DIST_GOFLAGS := -trimpath -buildvcs=false -ldflags "-s -w -X github.com/karpx/karpx/plugin.Version=$(DIST_VERSION)"
DIST_TAR := tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner
# The archive of platform os/arch: .zip on windows, .tar.gz elsewhere. krew's
# template (krew/karpx.yaml.tmpl) names the same files; krew's unit test reads
# them from `make dist-archives`, and `make dist` checks it wrote exactly these.
dist_archive = kubectl-karpx_$(DIST_VERSION)_$(subst /,_,$(1)).$(if $(filter windows/%,$(1)),zip,tar.gz)
DIST_ARCHIVES := $(foreach p,$(DIST_PLATFORMS),$(call dist_archive,$(p)))

.PHONY: dist-archives
dist-archives: ## Print the names of the archives `make dist` writes, one a line (no build).
	@printf '%s\n' $(DIST_ARCHIVES)

.PHONY: dist
dist: ## Build the kubectl-karpx release archives (binary, LICENSE, completion) into _output/dist.
	@rm -rf $(DIST_DIR) && mkdir -p $(DIST_DIR)
	@for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=kubectl-karpx_$(DIST_VERSION)_$${os}_$${arch}; \
		stage=$(DIST_DIR)/.stage/$$name; mkdir -p $$stage; \
		ext=; [ $$os = windows ] && ext=.exe; \
		echo "dist: $$name"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build $(DIST_GOFLAGS) -o $$stage/kubectl-karpx$$ext ./cmd/kubectl-karpx; \
		install -m 0644 LICENSE $$stage/LICENSE; \
		if [ $$os = windows ]; then \
			install -m 0644 hack/dist/kubectl_complete-karpx.cmd $$stage/; \
			TZ=UTC touch -d '1980-01-01 00:00:00' $$stage/*; \
			(cd $$stage && zip -X -q $(DIST_DIR)/$$name.zip $$(ls)); \
		else \
			install -m 0755 hack/dist/kubectl_complete-karpx $$stage/; \
			$(DIST_TAR) -C $$stage -cf - . | gzip -n > $(DIST_DIR)/$$name.tar.gz; \
		fi; \
	done
	@rm -rf $(DIST_DIR)/.stage
	@[ "$$(cd $(DIST_DIR) && ls kubectl-karpx_* | sort)" = "$$(printf '%s\n' $(DIST_ARCHIVES) | sort)" ] || \
		{ echo "dist: wrote $$(cd $(DIST_DIR) && ls), want $(DIST_ARCHIVES) (dist_archive and the loop above disagree)"; exit 1; }
	cd $(DIST_DIR) && sha256sum kubectl-karpx_* > SHA256SUMS && cat SHA256SUMS

.PHONY: krew
krew: dist krew-manifest ## Build the archives, then write and validate krew/karpx.yaml (DIST_PLATFORMS=linux/amd64: that platform's alone).

# HOST_PLATFORM: this machine's GOOS/GOARCH; CI builds the release artefacts
# for it alone (release-host), a release for every platform (release).
HOST_PLATFORM := $(shell go env GOOS)/$(shell go env GOARCH)

.PHONY: release
release: ## Build every release artefact: the archives and krew manifest of DIST_PLATFORMS, the images of IMAGE_PLATFORMS.
	$(MAKE) krew
	$(MAKE) images

.PHONY: release-host
release-host: ## Build and validate the release artefacts of this machine's platform only: its archive, a krew manifest naming it, its images (what CI runs).
	$(MAKE) krew DIST_PLATFORMS=$(HOST_PLATFORM)
	$(MAKE) images IMAGE_PLATFORMS=linux/$(shell go env GOARCH)

# KREW_MANIFEST: where krew-manifest writes (krew's unit test writes to a
# temporary directory from fake sums).
KREW_MANIFEST ?= krew/karpx.yaml

# KREW_PLATFORMS_AWK keeps the template's platform entries (each from its
# "  - selector:" line to the next; platforms stays the template's last
# key) whose os/arch is one of DIST_PLATFORMS, so a manifest built with
# DIST_PLATFORMS=linux/amd64 (CI) names only the archive it has.
define KREW_PLATFORMS_AWK
BEGIN { n = split(keep, k, " "); for (i = 1; i <= n; i++) want[k[i]] = 1 }
function flush() { if (entry != "" && (plat in want)) printf "%s", entry; entry = ""; plat = "" }
/^  - selector:/ { flush(); inplatforms = 1 }
inplatforms {
	entry = entry $$0 "\n"
	if (match($$0, /os: [a-z0-9]+, arch: [a-z0-9]+/)) { p = substr($$0, RSTART + 4, RLENGTH - 4); sub(/, arch: /, "/", p); plat = p }
	next
}
{ print }
END { flush() }
endef
export KREW_PLATFORMS_AWK

.PHONY: krew-manifest
krew-manifest: ## Write krew/karpx.yaml from krew/karpx.yaml.tmpl with the sha256 of the archives in _output/dist, and validate it.
	@args=(-e 's|@VERSION@|$(DIST_VERSION)|g' -e 's|@URL@|$(DIST_URL)|g'); \
	while read -r sum file; do \
		plat=$${file#kubectl-karpx_$(DIST_VERSION)_}; plat=$${plat%%.*}; \
		args+=(-e "s|@SHA256_$${plat}@|$$sum|g"); \
	done < $(DIST_DIR)/SHA256SUMS; \
	sed "$${args[@]}" krew/karpx.yaml.tmpl | grep -v '^# ' | awk -v keep="$(DIST_PLATFORMS)" "$$KREW_PLATFORMS_AWK" > $(KREW_MANIFEST)
	@! grep -n '@[A-Z0-9_a-z]*@' $(KREW_MANIFEST) || { echo "$(KREW_MANIFEST): placeholder left unfilled"; exit 1; }
	go tool validate-krew-manifest -skip-install -manifest $(KREW_MANIFEST)

IMAGES_DIR := $(ROOT)/_output/images
# Platforms of each image index (OS/ARCH, space-separated), built in this order.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_REPOSITORY ?= ghcr.io/karpx

.PHONY: images
images: ## Build the karpx-controller and karpx-webhook multi-platform OCI image indexes (IMAGE_PLATFORMS), their SBOMs and kustomize overlays using their tag into _output/images (no registry needed).
	@for p in $(IMAGE_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
		echo "CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -o $(IMAGES_DIR)/bin/$${os}_$${arch}/ ./cmd/karpx-controller ./cmd/karpx-webhook"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build $(DIST_GOFLAGS) -o $(IMAGES_DIR)/bin/$${os}_$${arch}/ ./cmd/karpx-controller ./cmd/karpx-webhook || exit 1; \
	done
	@mkdir -p $(IMAGES_DIR) && printf '%s\n' $(IMAGE_PLATFORMS) > $(IMAGES_DIR)/platforms
	go run ./hack/images -version $(DIST_VERSION) -repository $(IMAGE_REPOSITORY) -out $(IMAGES_DIR) \
		-bin-dir $(IMAGES_DIR)/bin -platforms "$(IMAGE_PLATFORMS)" -components karpx-controller,karpx-webhook
	@# Kustomize overlays deploying exactly these tags: kubectl apply -k _output/images/manifests/controller
	@for c in controller webhook; do mkdir -p $(IMAGES_DIR)/manifests/$$c; \
		printf '%s\n' "# Written by make images: manifests/$$c with the image it built." \
			'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' \
			'resources:' "  - ../../../../manifests/$$c" 'images:' \
			"  - name: ghcr.io/karpx/karpx-$$c" "    newName: $(IMAGE_REPOSITORY)/karpx-$$c" "    newTag: $(DIST_VERSION)" \
			> $(IMAGES_DIR)/manifests/$$c/kustomization.yaml; \
	done

##@ Development

.PHONY: generate
generate: $(BIN)/controller-gen docs ## Regenerate deepcopy code, CRDs (EC2NodeClass from apis/, NodePool/NodeClaim/NodeOverlay from $(KARPENTER_CRD_MODULE)), manifests/ from the chart and docs/rules.md.
	$(BIN)/controller-gen object paths=./apis/...
	$(BIN)/controller-gen crd paths=./apis/... output:crd:dir=manifests/crds
	dir=$$(go mod download -json $(KARPENTER_CRD_MODULE) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
		install -m 0644 "$$dir"/pkg/apis/crds/karpenter.sh_nodepools.yaml "$$dir"/pkg/apis/crds/karpenter.sh_nodeclaims.yaml \
		"$$dir"/pkg/apis/crds/karpenter.sh_nodeoverlays.yaml manifests/crds/
	$(MAKE) manifests

.PHONY: manifests
manifests: ## Write manifests/controller and manifests/webhook from charts/karpx, and charts/karpx-crd's templates from manifests/crds.
	go run ./hack/chartmanifests

.PHONY: chart-lint
chart-lint: ## Lint (strict) and render charts/karpx and charts/karpx-crd with Helm's Go SDK; check the schema and manifests/ against them.
	go test -count=1 ./test/helm

.PHONY: docs
docs: ## Regenerate docs/rules.md from the rule table and lint/examples, and docs/operations.md's values table from charts/karpx/values.schema.json.
	go run ./hack/rulesdoc -o docs/rules.md
	go run ./hack/valuesdoc -chart charts/karpx -o docs/operations.md

# The files `make generate` writes; generate-check fails when regenerating
# them changes anything (a type edited without `make generate`).
GENERATED := apis manifests/crds manifests/controller manifests/webhook charts/karpx-crd/templates docs/rules.md docs/operations.md

.PHONY: generate-check
generate-check: generate ## Regenerate deepcopy code and CRDs and fail if they differ from what is committed.
	@git diff --exit-code --stat -- $(GENERATED) && test -z "$$(git ls-files --others --exclude-standard -- $(GENERATED))" || \
		{ git status --short -- $(GENERATED); echo "generated files differ from the commit: run make generate and commit the result"; exit 1; }

# staticcheck (honnef.co/go/tools, pinned by go.mod's tool directive) with
# the checks of staticcheck.conf; every finding fails. Re-run after a merge.
.PHONY: lint
lint: ## staticcheck (bugs, simplifications, unused code) on every package.
	go tool staticcheck ./...

.PHONY: vet
vet: ## gofmt and go vet.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...

.PHONY: bench
bench: tools build bench-webhook bench-status bench-latency bench-rss ## Run the benchmarks and scripted measurements; prints figures.
	PATH="$(BIN):$$PATH" go test -run '^$$' -bench . -benchmem -count=1 ./...

# The scheduling benchmark suite: Karpenter's pod mix at 1,000/5,000/20,000
# pods on 400 synthetic and 1,363 catalogue instance types; prints one
# table (pods/s, nodes, $/h, allocations, peak heap, FFD reference); and
# the head-to-head's 2,000-pod burst solved in passes of 2,000 to 100 pods
# (nodes and $/h by pass size).
SCHED_BENCH ?= BenchmarkScheduling
SCHED_BENCHTIME ?= 3x
.PHONY: bench-scheduling
bench-scheduling: ## Scheduling benchmark suite (Karpenter's pod mix); prints one table.
	go test -count=1 -run '^$$' -bench '$(SCHED_BENCH)' -benchtime $(SCHED_BENCHTIME) ./autoscaler/scheduling/bench

# Provisioning latency on the real control plane with the simulator: waves
# of LATENCY_WAVE_PODS pending pods, then LATENCY_SINGLES single pods; prints
# p50/p99/max of karpx_provisioning_pod_to_launch_seconds with the batch
# window (Karpenter's defaults, 1s idle / 10s max).
LATENCY_WAVES ?= 10
LATENCY_WAVE_PODS ?= 50
LATENCY_SINGLES ?= 10
.PHONY: bench-latency
bench-latency: tools ## Provisioning latency (pending pod seen → CreateFleet issued), p50/p99/max.
	PATH="$(BIN):$$PATH" go test -count=1 -timeout 30m -run '^TestProvisioningLatency$$' -v ./test/e2e \
		-karpx.latency-waves $(LATENCY_WAVES) -karpx.latency-wave-pods $(LATENCY_WAVE_PODS) -karpx.latency-singles $(LATENCY_SINGLES) \
		| grep -E '^(=== RUN|--- |PASS|FAIL|ok)|latency_test.go|waves of|single pods:'

# Controller memory: bin/karpx-controller in its own process with RSS_NODES
# Nodes/NodeClaims and RSS_PODS_PER_NODE pods each in the real API server;
# prints peak RSS (VmHWM), RSS after the passes and the Go heap in use
# (issue 12's goal: <= 300 MiB at 2,000 nodes and 20,000 pods).
RSS_NODES ?= 2000
RSS_PODS_PER_NODE ?= 10
.PHONY: bench-rss
bench-rss: tools build ## Controller RSS with RSS_NODES nodes and RSS_NODES*RSS_PODS_PER_NODE pods.
	PATH="$(BIN):$$PATH" go test -count=1 -timeout 40m -run '^TestControllerRSS$$' -v ./test/e2e \
		-karpx.rss-nodes $(RSS_NODES) -karpx.rss-pods-per-node $(RSS_PODS_PER_NODE) -karpx.controller-binary $(BIN)/karpx-controller \
		| grep -E '^(=== RUN|--- |PASS|FAIL|ok)|rss_test.go'

.PHONY: bench-vs-karpenter
bench-vs-karpenter: ## Karpenter v1.13.0's own scheduling benchmark and karpx's on the same mix, same run; prints the ratio.
	hack/bench-vs-karpenter.sh

# Head to head on the real control plane: the same five workloads (burst of
# H2H_PODS pods of Karpenter's scheduling-benchmark mix, consolidation,
# drift, scale to zero, P5) against karpx + its own ec2sim, the real
# Karpenter AWS provider (bin/karpenter-aws, hack/karpenter-aws/go.mod's
# version) + its own ec2sim with the same settings, and upstream Karpenter
# v1.13.0's kwok provider, each on a fresh control plane, all with the
# simulated boot delay H2H_BOOT_DELAY; prints one table with a column per
# side (figures in docs/performance.md). About 65 minutes for the three
# sides at 500 pods on 2 cores (each Karpenter side spends up to 10 minutes
# of it waiting for its consolidation to settle). bench-vs-karpenter-e2e-large
# is the same at H2H_PODS_LARGE (2,000) pods, the larger burst (about 40
# minutes per side).
H2H_PODS ?= 500
H2H_PODS_LARGE ?= 2000
H2H_BOOT_DELAY ?= 5s
H2H_CONSOLIDATION_WINDOW ?= 2m
# After the window, how long no Node may change before the consolidation
# counts as settled (its own rows) and drift starts; 0 skips the wait.
H2H_CONSOLIDATION_QUIET ?= 90s
H2H_WARMUP ?= 2m
H2H_SIDES ?= karpx,karpenter-aws,karpenter-kwok
H2H_OUT ?= _output/head-to-head.md
# More flags for karpx's controller, e.g. --aws-api-budget-fraction=1 (all of
# EC2's buckets, as Karpenter AWS takes); empty runs its defaults.
H2H_KARPX_FLAGS ?=
.PHONY: bench-vs-karpenter-e2e
bench-vs-karpenter-e2e: tools build karpenter-kwok karpenter-aws ## karpx vs Karpenter AWS (on ec2sim) vs Karpenter's kwok provider on the same workloads; prints one table.
	@mkdir -p $(dir $(H2H_OUT))
	PATH="$(BIN):$$PATH" go test -count=1 -timeout 180m -run '^TestHeadToHead$$' -v ./test/headtohead \
		-karpx.h2h-pods $(H2H_PODS) -karpx.h2h-boot-delay $(H2H_BOOT_DELAY) \
		-karpx.h2h-consolidation-window $(H2H_CONSOLIDATION_WINDOW) -karpx.h2h-consolidation-quiet $(H2H_CONSOLIDATION_QUIET) \
		-karpx.h2h-sides $(H2H_SIDES) \
		-karpx.h2h-warmup $(H2H_WARMUP) -karpx.h2h-karpx-flags '$(H2H_KARPX_FLAGS)' \
		-karpx.h2h-out $(abspath $(H2H_OUT)) \
		| grep -E '^(=== RUN|--- |PASS|FAIL|ok)|headtohead_test.go|^\s*\||commit '
	@echo "--- table (also in $(H2H_OUT)) ---" && cat $(H2H_OUT)

.PHONY: bench-vs-karpenter-e2e-large
bench-vs-karpenter-e2e-large: ## bench-vs-karpenter-e2e at H2H_PODS_LARGE (2,000) pods; the table goes to _output/head-to-head-large.md.
	$(MAKE) bench-vs-karpenter-e2e H2H_PODS=$(H2H_PODS_LARGE) H2H_OUT=_output/head-to-head-large.md

# The admission load test: bin/karpx-webhook in its own process against a
# local kube-apiserver, 2,000 EC2NodeClass reviews/s for 30 s (issue 4's
# figure: p50/p99, CPU per review, peak RSS).
WEBHOOK_LOAD_RPS ?= 2000
WEBHOOK_LOAD_DURATION ?= 30s
.PHONY: bench-webhook
bench-webhook: tools build ## Admission latency of the running webhook at WEBHOOK_LOAD_RPS for WEBHOOK_LOAD_DURATION.
	PATH="$(BIN):$$PATH" go test -count=1 -run '^TestAdmissionLoad$$' -v ./webhook \
		-karpx.load-rps $(WEBHOOK_LOAD_RPS) -karpx.load-duration $(WEBHOOK_LOAD_DURATION) \
		-karpx.webhook-binary $(BIN)/karpx-webhook

# Fuzz targets, one "package:FuzzName" per line; add yours to the list.
# Each runs for FUZZ_TIME after its seed corpus (testdata/fuzz/<FuzzName>
# in the package, plus the seeds in the test); plain `go test` runs only
# the seeds. A failing input is saved under testdata/fuzz for a regression
# test. Compiling with coverage instrumentation takes a few minutes on a
# loaded 2-core machine.
FUZZ_TIME ?= 30s
FUZZ_TARGETS := \
	./webhook:FuzzWebhookLintVerdict \
	./lint:FuzzDecodeObjects \
	./lint:FuzzPlantedUnsafeLine \
	./lint:FuzzCheckUserData \
	./lint:FuzzParseMIME \
	./lint:FuzzParseNodeConfig ./lint:FuzzParseTOML ./lint:FuzzParsePowerShell ./lint:FuzzShellBounded ./lint:FuzzBottlerocketTOML ./lint:FuzzCloudConfigYAML ./lint:FuzzRenderJinja \
	./ec2sim:FuzzSQS \
	./ec2sim:FuzzQuery \
	./ec2sim:FuzzSSMGetParameter \
	./autoscaler/aws/controllers/interruption/messages:FuzzParse
.PHONY: fuzz
fuzz: ## Run every fuzz target in FUZZ_TARGETS for FUZZ_TIME each.
	@for target in $(FUZZ_TARGETS); do \
		pkg=$${target%%:*}; name=$${target##*:}; \
		echo "--- fuzz $$name in $$pkg for $(FUZZ_TIME)"; \
		go test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZ_TIME) || exit 1; \
	done

# The chaos suite, short version, as CI runs it (after `make test`), on
# a pool of E2E_PARALLEL shared control planes like `make test`'s; its
# timing report is _output/chaos-times.txt.
.PHONY: chaos-short
chaos-short: tools build ## Run the chaos suite's short version (what CI runs); prints one "chaos <fault>:" line each.
	@mkdir -p _output && rm -f _output/chaos.log
	PATH="$(BIN):$$PATH" KARPX_SCENARIO_LOG=$(ROOT)/_output/chaos.log KARPX_PREBUILT_BIN=$(BIN) KARPX_E2E_PARALLEL=$(E2E_PARALLEL) \
		go test -json -count=1 $(TEST_BUILD_FLAGS) -parallel $(E2E_PARALLEL) -timeout 30m -run '^TestChaos' ./test/e2e | $(TESTTIMES) -report $(ROOT)/_output/chaos-times.txt
	@cat _output/chaos.log

# problems-upstream: the five field problems (../shared/PROBLEMS.md) on the
# real Karpenter AWS provider (bin/karpenter-aws) with ec2sim set up as for
# karpx's own scenarios (test/problems); P3 and P4 reproduce there and are
# the controls of karpx's test/e2e TestP3/TestP4 (docs/problems.md).
.PHONY: problems-upstream
problems-upstream: tools karpenter-aws ## Run P1-P5 against the real Karpenter AWS provider; prints each scenario's figures.
	@mkdir -p _output && rm -f _output/problems-upstream.log
	PATH="$(BIN):$$PATH" KARPX_SCENARIO_LOG=$(ROOT)/_output/problems-upstream.log KARPX_PREBUILT_BIN=$(BIN) \
		go test -json -count=1 $(TEST_BUILD_FLAGS) -timeout 30m -run '^TestUpstreamProblem' ./test/upstream | $(TESTTIMES) -report $(ROOT)/_output/problems-upstream-times.txt
	@cat _output/problems-upstream.log 2>/dev/null || true

# differential: drift, expiry, drain order and consolidation decisions of
# karpx compared with the real Karpenter AWS provider's in the same
# scenario, both run at once, each on its own control plane and ec2sim
# (test/upstream TestDifferential*; results and accepted differences in
# docs/karpenter-differences.md).
.PHONY: differential
differential: tools build karpenter-aws ## Run drift, expiry, drain order and consolidation on karpx and the real Karpenter AWS provider side by side and compare their decisions.
	@mkdir -p _output
	PATH="$(BIN):$$PATH" KARPX_PREBUILT_BIN=$(BIN) \
		go test -json -count=1 $(TEST_BUILD_FLAGS) -timeout 40m -run '^TestDifferential' ./test/upstream | $(TESTTIMES) -report $(ROOT)/_output/differential-times.txt

# The chaos suite, long version (five times the pods and faults of the
# short version `make chaos-short` runs); figures in docs/reliability.md.
.PHONY: chaos
chaos: tools build ## Run the chaos suite (TestChaos*) on the real control plane; prints one "chaos <fault>:" line each.
	@mkdir -p _output && rm -f _output/chaos.log
	PATH="$(BIN):$$PATH" KARPX_CHAOS_LONG=1 KARPX_SCENARIO_LOG=$(ROOT)/_output/chaos.log go test -count=1 -timeout 45m -run '^TestChaos' ./test/e2e
	@cat _output/chaos.log

# `kubectl karpx status` at scale: STATUS_SCALE NodeClaims and Nodes in a
# local kube-apiserver, median wall time against `kubectl get nodeclaims -o
# json` (issue 11's figure: <= 1.5x).
STATUS_SCALE ?= 5000
.PHONY: bench-status
bench-status: tools build ## Wall time of kubectl karpx status vs kubectl get nodeclaims -o json with STATUS_SCALE NodeClaims and Nodes.
	PATH="$(BIN):$$PATH" go test -count=1 -timeout 30m -run '^TestStatusScale$$' -v ./plugin/cmd \
		-karpx.status-scale $(STATUS_SCALE) -karpx.plugin-binary $(BIN)/kubectl-karpx

.PHONY: install-plugin
install-plugin: build ## Put kubectl-karpx on PATH (in GOBIN or ~/go/bin).
	install -m 0755 $(BIN)/kubectl-karpx $$(go env GOPATH)/bin/kubectl-karpx

.PHONY: clean
clean: ## Remove karpx's binaries (keeps the cached control plane).
	rm -f $(BIN)/karpx-controller $(BIN)/karpx-webhook $(BIN)/kubectl-karpx $(BIN)/ec2sim

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
