# callscribe — the front door. Each target calls the real command.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := bin/golangci-lint-$(GOLANGCI_LINT_VERSION)
SQLC_VERSION := v1.31.1
SQLC := bin/sqlc-$(SQLC_VERSION)

.PHONY: help test lint generate demo build fuzz bench

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

demo: build ## the pipeline end to end on throwaway PostgreSQL and Redis against a misbehaving vendor and CRM, then a report
	bin/callscribe demo

test: ## go vet and go test -race (plus the crash-point tests) against running or throwaway PostgreSQL and Redis
	go run ./internal/cmd/testenv --install -- sh -c 'go vet ./... && go vet -tags callscribe_faults ./... && go test -race -count=1 ./... && go test -race -count=1 -tags callscribe_faults -run TestCrashPoints ./jobs/'

lint: $(GOLANGCI_LINT) ## golangci-lint (pinned) with .golangci.yml
	$(GOLANGCI_LINT) run ./...

generate: $(SQLC) ## regenerate the typed SQL (sqlc, pinned) of ledger, outbox and tokens from their .sql files
	cd ledger/internal/dbsqlc && $(CURDIR)/$(SQLC) generate
	cd outbox/internal/dbsqlc && $(CURDIR)/$(SQLC) generate
	cd tokens/internal/dbsqlc && $(CURDIR)/$(SQLC) generate

build: ## build bin/callscribe
	go build -o bin/callscribe ./cmd/callscribe

bench: ## the concurrency window against per-worker sleepers on one throttling vendor (figures side by side)
	go run ./internal/cmd/testenv --install -- go test -run '^$$' -bench Herd -benchtime 1x ./jobs/

fuzz: ## fuzz the Retry-After parser for 60s
	go test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./ledger/retryafter/

$(GOLANGCI_LINT):
	GOBIN=$(CURDIR)/bin go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv bin/golangci-lint $@

$(SQLC):
	GOBIN=$(CURDIR)/bin go install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)
	mv bin/sqlc $@
