# callscribe — the front door. Each target calls the real command.

# The Go toolchain every target builds and tests with (go1.26.8 carries
# standard-library vulnerabilities fixed later; see README). The go command
# fetches it from the module proxy; a machine's own Go ignores go.mod here.
export GOTOOLCHAIN := go1.27.3

# Tools built under that toolchain are named after it: a linter built by an
# older Go cannot type-check a newer standard library.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := bin/golangci-lint-$(GOLANGCI_LINT_VERSION)-$(GOTOOLCHAIN)
SQLC_VERSION := v1.31.1
SQLC := bin/sqlc-$(SQLC_VERSION)
GOVULNCHECK_VERSION := v1.9.0
GOVULNCHECK := bin/govulncheck-$(GOVULNCHECK_VERSION)-$(GOTOOLCHAIN)
# The vulnerability database, built offline from the OSV files of this
# golang.org/x/vulndb module version (no access to the database server).
VULNDB_VERSION := v0.0.0-20261105234957-e22db6528018
VULNDB := bin/vulndb-$(VULNDB_VERSION)

.PHONY: help test test-load chaos lint vuln generate demo build fuzz bench screenshot rules

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

demo: build ## the pipeline end to end on throwaway PostgreSQL and Redis against a misbehaving vendor and CRM, then a report
	bin/callscribe demo

test: ## go vet and go test -race (plus the crash-point tests) against running or throwaway PostgreSQL and Redis
	go run ./internal/cmd/testenv --install -- sh -c 'go vet ./... && go vet -tags callscribe_faults ./... && go test -race -count=1 ./... && go test -race -count=1 -tags callscribe_faults -run TestCrashPoints ./jobs/'

# The tests whose guarantees hang on timing, on a busy machine: a CPU hog
# (testenv --hogs 0) on every core, each test three times, one package at a
# time (-p 1) so that the hogs are the only other load. Both go test runs
# always run; the target fails if either did.
test-load: ## go test -race -count=3 of the load-sensitive tests (window herd, rollout cohorts, two workers in a 429 storm, crash points, CRM deliveries woken in deadline order, a replay run into a throttling staging CRM, its rate ceiling and its SIGKILLed process resumed, dial long-polls under a stalled Redis and at shutdown) with a CPU hog on every core
	go run ./internal/cmd/testenv --install --hogs 0 -- sh -c 'rc=0; \
	  go test -race -count=3 -p 1 -timeout 30m -run "^(TestWindowNoHerdAfterCooldown|TestTwoWorkerProcessesShareOneScopeIn429Storm|TestRolloutCohorts)\$$" ./jobs/ ./cmd/callscribe/cli/ || rc=1; \
	  go test -race -count=3 -p 1 -timeout 30m -tags callscribe_faults -run "^TestCrashPoints\$$" ./jobs/ || rc=1; \
	  go test -race -count=3 -p 1 -timeout 30m -run "^(TestReplayRunAgainstAThrottlingStagingCRM|TestReplayRunRateCeiling|TestReplayResumeWhileDeliveringEnqueuesNoSecondJob|TestWindowWakesDeliveriesInDeadlineOrder)\$$" ./outbox/ || rc=1; \
	  go test -race -count=3 -p 1 -timeout 30m -run "^TestReplayKilledMidRunResumes\$$" ./cmd/callscribe/cli/ || rc=1; \
	  go test -race -count=3 -p 1 -timeout 30m -run "^(TestAttackDialLongPollsBoundedNoGrantFromTimeouts|TestAttackLongPollsAnsweredOnShutdown|TestAttackSlotWaitAnsweredOnShutdown|TestAttackServeLongPollAnsweredOnShutdown|TestDialLongPollsShareReads)\$$" ./capacity/httpapi/ ./cmd/callscribe/cli/ || rc=1; \
	  exit $$rc'

# The cooldown guarantee under chaos on a busy machine: two CPU hogs,
# three `callscribe worker` processes, one SIGKILLed and restarted every
# 200-500ms (60 times) while 300 recordings go through independent Python
# doubles of the vendor and the CRM (internal/cmd/chaos/doubles.py), then
# the report. Flags: make chaos CHAOS_FLAGS='--recordings 100 --kills 20'.
chaos: ## SIGKILL workers at random while 300 recordings go through independent throttling doubles, with 2 CPU hogs; checks the exact cooldown rule, one transcription and one CRM application per key
	go run ./internal/cmd/testenv --hogs 2 -- go run ./internal/cmd/chaos $(CHAOS_FLAGS)

# promtool ships in Debian's prometheus package: installed when missing, as
# make test installs its services' packages (root on Debian or Ubuntu).
rules: ## promtool check rules and promtool test rules of docs/prometheus (the alert rules and their unit tests on synthetic series)
	@if ! command -v promtool >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "rules: installing Debian's prometheus package for promtool"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null; }; \
	  else \
	    echo "rules: promtool not found: install it with apt-get install -y prometheus (Debian's package ships it)" >&2; exit 1; \
	  fi; \
	fi
	promtool check rules docs/prometheus/alerts.yml
	cd docs/prometheus && promtool test rules alerts_test.yml

lint: $(GOLANGCI_LINT) ## golangci-lint (pinned) with .golangci.yml
	$(GOLANGCI_LINT) run ./...

vuln: $(GOVULNCHECK) $(VULNDB) ## govulncheck (pinned) against the pinned vulnerability database; fails if the code reaches a known vulnerability
	$(GOVULNCHECK) -db file://$(CURDIR)/$(VULNDB) ./...

generate: $(SQLC) ## regenerate the typed SQL (sqlc, pinned) of ledger, outbox, tokens and the stored call caps from their .sql files
	cd ledger/internal/dbsqlc && $(CURDIR)/$(SQLC) generate
	cd outbox/internal/dbsqlc && $(CURDIR)/$(SQLC) generate
	cd cmd/callscribe/internal/serve/auth/internal/dbsqlc && $(CURDIR)/$(SQLC) generate
	cd capacity/orgcap/internal/dbsqlc && $(CURDIR)/$(SQLC) generate

build: ## build bin/callscribe
	go build -o bin/callscribe ./cmd/callscribe

bench: ## BenchmarkHerd (the window against per-worker sleepers on one throttling vendor; the exact cooldown rule and the admission-to-send gap, idle and with a CPU hog per core); BenchmarkMergedMoves (a group commit's moves as one merged statement against one-row statements: PostgreSQL's and the client's CPU per move); BenchmarkThroughput: River bare no-op jobs, the server's commit floor, the pipeline received -> delivered (worker process, HTTP doubles) and the peer (a hand-rolled River pipeline, two jobs per recording, as processes with the same workers, doubles and recordings) at 1,000 and 10,000 recordings, one table with commits and machine-wide CPU ms per recording and callscribe's throughput, ingest and CPU as multiples of the peer's: the price of its guarantees (~8 min). BENCH_LARGE=1 adds the worker's RSS with 100,000 queued (~10 min more); BENCH_CPUPROFILE=FILE writes the worker's CPU profile of the 10,000 run, BENCH_PEER_CPUPROFILE=FILE the peer worker's
	go run ./internal/cmd/testenv --install -- go test -run '^$$' -bench Herd -benchtime 1x ./jobs/
	go run ./internal/cmd/testenv --install -- go test -run '^$$' -bench MergedMoves -benchtime 1000x ./ledger/
	BENCH_LARGE=$(BENCH_LARGE) BENCH_CPUPROFILE=$(abspath $(BENCH_CPUPROFILE)) BENCH_PEER_CPUPROFILE=$(abspath $(BENCH_PEER_CPUPROFILE)) go run ./internal/cmd/testenv --install -- go test -run '^$$' -bench Throughput -benchtime 1x -timeout 60m ./cmd/callscribe/cli/

screenshot: ## write status.png: the status page with demo data, in headless Chromium (apt-get install -y chromium)
	go run ./cmd/callscribe/internal/screenshot -o status.png

fuzz: ## fuzz the Retry-After parser for 60s
	go test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./ledger/retryafter/

$(GOLANGCI_LINT):
	GOBIN=$(CURDIR)/bin go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv bin/golangci-lint $@

$(SQLC):
	GOBIN=$(CURDIR)/bin go install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)
	mv bin/sqlc $@

$(GOVULNCHECK):
	GOBIN=$(CURDIR)/bin go install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)
	mv bin/govulncheck $@

$(VULNDB):
	rm -rf $@.tmp
	go mod download golang.org/x/vulndb@$(VULNDB_VERSION)
	go run golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION) \
		-vulns "$$(go list -m -f '{{.Dir}}' golang.org/x/vulndb@$(VULNDB_VERSION))/data/osv" -out $@.tmp
	mv $@.tmp $@
