# Switchyard's developer commands. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO          ?= go
TEMPL       := $(GO) tool templ
comma       := ,
SQLC        := $(GO) tool -modfile=tools/go.mod sqlc
STATICCHECK := $(GO) tool -modfile=tools/go.mod staticcheck
# One private PostgreSQL cluster for the whole test run (see internal/dbtest).
WITHPG      := $(GO) run ./internal/dbtest/withpg

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# run and demo start the built binary, not `go run` (which reports a stop by
# Ctrl-C as a failure), in the terminal's foreground (scripts/foreground.sh):
# Ctrl-C stops the console and its PostgreSQL, and make exits 0.
CONSOLE_BIN := .tools/bin/console

.PHONY: run
run: ## run the console on http://127.0.0.1:8080 with its own PostgreSQL in ./.switchyard
	@scripts/setup.sh --postgres
	$(GO) build -o $(CONSOLE_BIN) ./cmd/console
	scripts/foreground.sh $(CONSOLE_BIN)

.PHONY: demo
demo: ## the demo: traffic, a flaky destination and demo sign-in on http://127.0.0.1:8080, data in ./.switchyard-demo
	@scripts/setup.sh --postgres
	$(GO) build -o $(CONSOLE_BIN) ./cmd/console
	scripts/foreground.sh $(CONSOLE_BIN) demo

.PHONY: test
# Beside the main run, not before it: the console binary that the tests
# run as a process, built once (consoletest.PrebuiltEnv) while the test
# binaries compile, and the unprivileged rerun, whose output is printed
# after the main run's (either failing fails the target). go vet runs in
# `make lint`, so not again here.
test: setup ## install what tests need, then run every test (unit, database, browser) with the race detector
	@work="$$(mktemp -d)"; trap 'rm -rf "$$work"' EXIT; \
	{ $(GO) build -o "$$work/console.part" ./cmd/console >"$$work/build.log" 2>&1 \
		&& mv "$$work/console.part" "$$work/console" || mv "$$work/build.log" "$$work/console.failed"; } & build=$$!; \
	$(MAKE) --no-print-directory test-unprivileged >"$$work/unprivileged.log" 2>&1 & unprivileged=$$!; \
	status=0; CONSOLE_TEST_BINARY="$$work/console" $(WITHPG) $(GO) test -race -vet=off -count=1 -timeout 15m ./... || status=$$?; \
	wait $$build; wait $$unprivileged || status=1; cat "$$work/unprivileged.log"; exit $$status

# The embedded server and the test harness must work for a normal user too,
# not only for root (who runs PostgreSQL as the postgres account). As root,
# this runs their tests again as that unprivileged account.
.PHONY: test-unprivileged
test-unprivileged: ## as root: rerun the embedded-PostgreSQL and harness tests as the postgres account
	@if [ "$$(id -u)" -ne 0 ] || ! id postgres >/dev/null 2>&1; then echo "test-unprivileged: not root, already covered"; exit 0; fi; \
	dir="$$(mktemp -d)"; trap 'rm -rf "$$dir"' EXIT; chmod 755 "$$dir"; chown postgres "$$dir"; \
	for pkg in pgembed migrate dbtest; do \
		$(GO) test -c -race -o "$$dir/$$pkg.test" ./internal/$$pkg; \
		(cd "$$dir" && runuser -u postgres -- env HOME="$$dir" TMPDIR="$$dir" "./$$pkg.test" -test.count=1 >"$$dir/$$pkg.log" 2>&1) \
			|| { cat "$$dir/$$pkg.log"; echo "FAIL internal/$$pkg as the postgres account"; exit 1; }; \
		echo "ok   internal/$$pkg as the postgres account"; \
	done

.PHONY: test-short
test-short: ## run the tests without the browser tests
	$(WITHPG) $(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)

.PHONY: setup
setup: ## install Chromium, the playwright driver, PostgreSQL and the Go tools if missing
	@scripts/setup.sh

.PHONY: generate
generate: ## regenerate templ components, sqlc queries and migrations/schema.sql
	$(TEMPL) generate
	$(SQLC) generate
	$(WITHPG) scripts/schema-dump.sh

.PHONY: lint
lint: ## gofmt, go vet, staticcheck, stale generated code and schema.sql, vendored asset checksums
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$'))"; \
		if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	$(TEMPL) generate -check
	$(SQLC) diff
	$(WITHPG) scripts/schema-dump.sh --check
	scripts/vendor-assets.sh --check
	$(GO) mod tidy -diff
	cd examples/orders && $(GO) mod tidy -diff

# River lives in tools/peers/go.mod only, never in the product's go.mod.
.PHONY: bench-peers
bench-peers: ## River and Switchyard drain the same no-op messages on one server, side by side (MESSAGES=100000; DATABASE_URL or a throwaway cluster)
	cd tools/peers && $(GO) run . --messages $(or $(MESSAGES),100000)

.PHONY: bench-retained
bench-retained: ## Switchyard drains on an empty outbox and after 10,000,000 delivered and 100,000 dead messages retained, by turns; each kind's history seeded once into a template database, copied for each round (RETAINED, RETAINED_DEAD; DATABASE_URL or a throwaway cluster)
	cd tools/peers && $(GO) run . --messages $(or $(MESSAGES),100000) --river-workers '' --retained $(or $(RETAINED),10000000) --retained-dead $(or $(RETAINED_DEAD),100000)

.PHONY: bench-http
bench-http: ## Switchyard drains to a no-op and over signed HTTP to the bench's local receiver, by turns (MESSAGES=100000; DATABASE_URL or a throwaway cluster)
	cd tools/peers && $(GO) run . --messages $(or $(MESSAGES),100000) --river-workers '' --http

.PHONY: bench-latency
bench-latency: ## River and Switchyard under the same offered load, side by side, each at its best of its cooldowns: latency from each enqueue's commit to its delivery (RATE=1000, WARMUP=2 seconds untimed, SECONDS=60 timed, ENQUEUERS=16 transactions at once, WAKE_COOLDOWNS=5ms,1ms Switchyard's; about 22 minutes; DATABASE_URL or a throwaway cluster)
	cd tools/peers && $(GO) run . --rate $(or $(RATE),1000) --warmup-seconds $(or $(WARMUP),2) --seconds $(or $(SECONDS),60) --enqueuers $(or $(ENQUEUERS),16) --switchyard-wake-cooldowns $(or $(WAKE_COOLDOWNS),5ms$(comma)1ms)

# The floor is pgbench, found beside the server binaries (postgresql-15).
.PHONY: bench-inbox-floor
bench-inbox-floor: ## the inbox bench and its pgbench floor by turns on one server, medians and ratio (EVENTS=50000, HANDLER=customer-upsert or forward; DATABASE_URL or the embedded server)
	$(GO) run ./cmd/console bench inbox --floor --events $(or $(EVENTS),50000) --rounds $(or $(ROUNDS),3) --handler $(or $(HANDLER),customer-upsert)

.PHONY: vendor-assets
vendor-assets: ## re-download the pinned htmx, SSE extension, idiomorph and uPlot files
	scripts/vendor-assets.sh

.PHONY: clean
clean: ## remove build and test leftovers (keeps ./.switchyard and ./.switchyard-demo, the consoles' data)
	rm -rf .tools e2e/screenshots
