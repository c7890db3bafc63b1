# netdoctor: `make demo` sets up and shows the tool, `make test` sets up
# and runs every test (root tests need root; they skip otherwise).
# `make build` needs only Go; `make package` makes the tarball and .deb.
export PATH := /usr/local/go/bin:$(PATH)
# The release is the VERSION file's (the binary embeds it too, so that
# `go install` reports it); the commit says which build of it this is.
VERSION ?= $(shell cat VERSION)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -modified)
GOFLAGS_BUILD = -trimpath -ldflags "-s -w -X github.com/netdoctor/netdoctor/internal/cli.Version=$(VERSION) -X github.com/netdoctor/netdoctor/internal/cli.Commit=$(COMMIT)"

.PHONY: all build deps test test-parallel test-measuring stress fuzz lint demo bench package clean deploy-check

all: build

# The lab's and the tests' real servers and tools (root, apt-get).
deps:
	@scripts/deps.sh lab

# Only Go: nothing is installed.
build:
	@scripts/deps.sh go
	CGO_ENABLED=0 go build $(GOFLAGS_BUILD) -o bin/netdoctor ./cmd/netdoctor

# dist/netdoctor-VERSION-linux-amd64.tar.gz and dist/netdoctor_*.deb:
# the binary, its man pages and completions, the agent's systemd unit.
package: build
	scripts/package.sh $(VERSION)

# Beyond gofmt and vet: staticcheck, errors compared with errors.Is/As
# (errorlint), comments that are sentences (godot). The linters' versions
# are pinned in tools/go.mod, apart from the program's own dependencies.
TOOL = go tool -modfile=tools/go.mod
lint:
	@unformatted=$$(gofmt -l cmd internal bench); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	GOOS=darwin go vet ./...
	$(TOOL) staticcheck ./...
	$(TOOL) go-errorlint ./...
	$(TOOL) godot $$(find cmd internal bench -name '*.go')

# The tests run in two passes. First every package at once (go test's
# default: as many as there are CPUs), but for the tests that measure;
# then those, one package at a time with nothing beside them. A test
# measures when it judges throughput, latency or loss on this machine (a
# load against real servers judged from the host's counters, CPU
# included; a rate through a tbf; round-trip times within 10 to 25 %;
# netdoctor beside wrk or iperf3), or when it changes a host-wide
# setting (nf_conntrack_max) that another test's connections would feel:
# another package's load beside it would be its noise. Every other test
# waits for what it needs by polling (internal/poll), so a busy machine
# only makes it slower: `make stress` runs them with every CPU kept busy.
# What each pass skips the other runs (-skip and -run of one list), so
# no test is left out. Measured on the 2-CPU machine: bench/README.md.
MEASURING = ^(TestLab|TestTuneLab|TestLabCleanAfterKill|TestPrometheusAlerts|TestRun.*|TestPath.*|TestCheckDependency.*|TestAgentDependency|TestCheckLossyResolver|TestCapacity(CPU|DependencyPool|GeneratorLimited|WorkerPool)|TestLabPortSearch|TestCapacitySeed000|TestWrkCompatible|TestLabTCPAgreesWithIperf3|TestLabTCPSlowJoins|TestLabUDPLoss.*|TestRateHolds|TestRateShowsStall|TestReqPerSec|TestRamp|TestScriptDelayLikeWrk|TestScriptHTTPSDelayStop|TestTBFSaturated|TestSetGlobal.*|TestDelayRTT|TestDelayRate)$$
#   internal/cli     TestLab, TestTuneLab (the seed cases loaded before and
#                    after their fix, compared), TestRun* (loads judged
#                    from both hosts' counters), TestPath* (capacity
#                    through a tbf), the dependency tests (round trips),
#                    TestCheckLossyResolver, the capacity searches
#                    (TestCapacity* of the cli: loads up to a knee, seed
#                    000 before and after its fix),
#                    TestLabPortSearch (a lab run's profile),
#                    TestWrkCompatible (beside
#                    wrk), TestPrometheusAlerts, TestLabCleanAfterKill and
#                    TestRunSeveralFaults (nf_conntrack_max)
#   internal/layer   TCP beside iperf3 and through a tbf with slow joins,
#                    UDP loss through nft
#   internal/load    the open-loop rate, the stall in p99, Req/Sec
#                    samples, the ramp, scripts' delays beside wrk
#   internal/collect a tbf's rate and drops
#   internal/lab     TestSetGlobal* (a host-wide setting), TestDelayRTT and
#                    TestDelayRate (the delay element's round trip and rate)
test: deps lint build
	@$(MAKE) --no-print-directory test-parallel
	@$(MAKE) --no-print-directory test-measuring
	@$(MAKE) --no-print-directory deploy-check
	@$(MAKE) --no-print-directory fuzz

test-parallel:
	go test -count=1 -timeout 30m -skip '$(MEASURING)' ./...

test-measuring:
	go test -count=1 -p 1 -parallel 2 -timeout 45m -run '$(MEASURING)' ./...

# The tests that wait on processes, sockets and timers, TIMED's packages
# but for the measuring ones, STRESS_ROUNDS times in a row with four busy
# loops per CPU in their session (scripts/stress-test.sh; root tests need
# root; where others share the machine, under its lock:
# flock /tmp/nd-root.lock make stress).
TIMED = ./internal/agent ./internal/app ./internal/cli ./internal/collect ./internal/kmsg ./internal/lab \
	./internal/layer ./internal/load/... ./internal/nginx ./internal/phpfpm ./internal/resolver \
	./internal/sockdiag ./internal/source ./internal/tune
STRESS_ROUNDS ?= 3
stress:
	scripts/stress-test.sh $(STRESS_ROUNDS) '$(MEASURING)' $(TIMED)

# The Kubernetes manifests and the Grafana dashboard in deploy/, checked
# offline: a module of its own (deploy/go.mod), so that the program does
# not depend on the Kubernetes and prometheus-operator APIs.
deploy-check:
	cd deploy && go test -count=1 ./...

# The readers of files a user may be handed — plans, reports, bundles and
# the profiles in them — of the ELF files behind other users' processes,
# of the FastCGI answers of a php-fpm another user may run, and of the
# kernel log as syslog(2) gives it and perf's ring-buffer records,
# fuzzed for FUZZTIME each (about 30 s in all once built). Their seeds and
# testdata/fuzz corpora run with every go test; here new inputs are
# tried. A crasher is written to the package's testdata/fuzz/NAME: fix
# the code, keep the file, commit both. Minimizing a large input may take
# a minute, so it is cut short here.
#
# The budget is a count of executions, not a duration: with a duration,
# Go 1.26's fuzz coordinator can report its own deadline as a failure
# ("context deadline exceeded", no input written: go.dev/issue/75804,
# fixed in Go 1.27), as one CI run did. 30000 executions take 1 to 11 s
# a target here (2 600 to 47 000 a second). A target slower than that
# has its own count after an @ (FuzzLoadObject measures each input's
# allocations, which stops the world: about 800 a second).
FUZZTIME ?= 30000x
FUZZ = FuzzReadPlan:./internal/tune FuzzReadInput:./internal/tune FuzzRead:./internal/report FuzzParseSyslog:./internal/kmsg \
	FuzzRead:./internal/evidence FuzzReadBundle:./internal/cli FuzzScanBuild:./internal/nginx FuzzDecode:./internal/perf FuzzSummarize:./internal/cpuprof \
	FuzzDecodeEntry:./internal/conntrack \
	FuzzDecodeTCPInfo:./internal/sockdiag FuzzDecodeConn:./internal/sockdiag FuzzLoadObject:./internal/symtab@5000x \
	FuzzDecodeResponse:./internal/phpfpm
fuzz:
	@for f in $(FUZZ); do \
		n=$(FUZZTIME); case $$f in *@*) n=$${f##*@}; f=$${f%@*};; esac; \
		echo "go test -run '^$$' -fuzz '^$${f%%:*}$$' -fuzztime $$n -fuzzminimizetime 1s $${f#*:}"; \
		go test -run '^$$' -fuzz "^$${f%%:*}\$$" -fuzztime $$n -fuzzminimizetime 1s "$${f#*:}" || exit 1; \
	done

# The main job on the built-in lab: seed 000 with every fault at once,
# diagnosed, then fixed by netdoctor itself: a plan computed from the
# report, applied, measured again with the same load, rolled back (root).
demo: deps build
	bin/netdoctor lab run nginx-php-throughput --tune

bench: build
	bench/snapshot.sh

clean:
	rm -rf bin dist
