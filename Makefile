# gitlease developer tasks. `make test` is what CI runs (see .ci/run).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
# How long `make fuzz` runs each fuzz target.
FUZZTIME ?= 10s
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: test check-generated check-fmt vet generate dev screenshots bench fuzz build chaos

# test: generated code is current, code is formatted and vetted, then the
# whole test suite runs against a real PostgreSQL (scripts/with-postgres).
test: check-generated check-fmt vet
	@command -v chromium >/dev/null || echo "chromium not found: the dashboard's browser tests (app/ui) are skipped; install it with: apt-get install -y chromium" >&2
	scripts/with-postgres $(GO) test -count=1 ./...

# sqlc lives in its own module (tools/) so its dependencies stay out of the
# product's go.mod. -f paths are resolved against the config file's folder.
SQLC = cd tools && $(GO) tool sqlc -f ../db/sqlc.yaml

check-generated:
	@$(SQLC) diff || { \
		echo "generated sqlc code in db/dbq is out of date with db/queries or db/migrations; run \`make generate\`" >&2; \
		exit 1; }

check-fmt:
	@files=$$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 | xargs -0 -r gofmt -l); \
	if [[ -n $$files ]]; then \
		echo "these files are not gofmt-formatted; run \`gofmt -w\` on them:" >&2; \
		echo "$$files" >&2; \
		exit 1; \
	fi

# vet covers bench/ too: it is a module of its own (River's dependencies
# stay out of gitlease's), so nothing else would notice it no longer builds.
vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

generate:
	$(SQLC) generate

# dev: builds bin/gitlease and runs `bin/gitlease dev`, so the commands its
# banner prints (bin/gitlease deliver …) work pasted from the checkout root.
# Ctrl-C ends it with status 0: the binary itself handles the signal (no
# `go run` in between to turn it into "Error 1").
dev: build
	bin/gitlease dev

# screenshots: regenerates docs/ui/*.png with the dashboard's browser test
# and the check run picture (needs chromium).
screenshots:
	scripts/with-postgres env GITLEASE_UI_SCREENSHOTS=$(CURDIR)/docs/ui $(GO) test -count=1 -run '^(TestBrowser|TestCheckRunPicture)$$' -v ./app/ui/

bench:
	scripts/with-postgres $(GO) test -run '^$$' -bench . -benchmem ./...

# chaos: the long chaos tests (serve killed 20 times under load, Postgres
# restarted under load, GitHub failing 30% of calls); `make test` runs their
# short versions. See docs/chaos.md.
chaos:
	scripts/with-postgres env GITLEASE_CHAOS_LONG=1 $(GO) test -count=1 -timeout 30m -v ./cmd/gitlease/chaos/

# fuzz: each Fuzz* target in turn, FUZZTIME each (go test -fuzz takes one
# target at a time). Example: make fuzz FUZZTIME=1m
fuzz:
	@targets=$$(grep -rEo --include='*_test.go' --exclude-dir=.git --exclude-dir=testdata \
		'^func Fuzz[A-Za-z0-9_]*\([A-Za-z0-9_]+ \*testing\.F\)' . | \
		sed -E 's#^(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' | sort -u); \
	if [[ -z $$targets ]]; then echo "no fuzz targets found"; exit 0; fi; \
	while read -r pkg name; do \
		echo "==> $$pkg $$name ($(FUZZTIME))"; \
		scripts/with-postgres $(GO) test "$$pkg" -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) </dev/null; \
	done <<< "$$targets"

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/gitlease ./cmd/gitlease
