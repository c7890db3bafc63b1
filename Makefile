# netdoctor: `make demo` sets up and shows the tool, `make test` sets up
# and runs every test (root tests need root; they skip otherwise).
# `make build` needs only Go; `make package` makes the tarball and .deb.
export PATH := /usr/local/go/bin:$(PATH)
# The release is the VERSION file's (the binary embeds it too, so that
# `go install` reports it); the commit says which build of it this is.
VERSION ?= $(shell cat VERSION)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -modified)
GOFLAGS_BUILD = -trimpath -ldflags "-s -w -X github.com/netdoctor/netdoctor/internal/cli.Version=$(VERSION) -X github.com/netdoctor/netdoctor/internal/cli.Commit=$(COMMIT)"

.PHONY: all build deps test lint-build test-parallel test-measuring slowest stress fuzz lint demo bench package clean deploy-check

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

# `make test` is CI (.ci/run): 15 minutes at most on the 2-CPU machine,
# measured in bench/README.md. It overlaps what waits on something other
# than the CPUs: first the servers' install (deps: apt, the network)
# beside lint and build (the CPUs); then the first test pass, whose
# tests wait on processes, sockets and timers, beside the fuzzing and
# the manifests' check; then the measuring pass alone. It ends with the
# ten slowest tests and their times. go test's own vet is off in both
# passes: lint's go vet runs every analyzer it would, and more.
#
# The tests run in two passes. First four packages at a time, and four
# tests at a time within one (twice go test's default of one a CPU:
# they wait more than they compute, and 2 at a time the pass took 145 s
# for 270 s of packages), but for the tests that measure;
# then those, one package at a time with nothing beside them. A test
# measures when it judges throughput, latency or loss on this machine (a
# load against real servers judged from the host's counters, CPU
# included; a rate through a tbf; round-trip times within 10 to 25 %;
# netdoctor beside wrk or iperf3), or when it changes a host-wide
# setting (nf_conntrack_max) that another test's connections would feel:
# another package's load beside it would be its noise. Within
# internal/cli the measuring tests whose load is light run six at a
# time, longest first (TestLight), those whose fault bounds a load that
# leaves a CPU idle four at a time (TestPaired), and TestLab runs the
# scenarios whose judgement stands beside another lab's (besideAnother)
# three at a time after its others; each pool alone. Every other test waits
# for what it needs by polling
# (internal/poll), so a busy machine only makes it slower: `make stress`
# runs them with every CPU kept busy. What each pass skips the other
# runs (-skip and -run of one list), so no test is left out. Measured on
# the 2-CPU machine: bench/README.md.
MEASURING = ^(TestLab|TestTuneLab|TestLabCleanAfterKill|TestPrometheusAlerts|TestRun.*|TestCheckDependencyQuiet|TestCheckTLSHandshakes|TestPaired|TestLight|TestCapacityCPU|TestLabPortSearch|TestWrkCompatible|TestLabTCPAgreesWithIperf3|TestLabTCPSlowJoins|TestLabUDPLoss.*|TestRateHolds|TestRateShowsStall|TestEnginesAgree|TestReqPerSec|TestRamp|TestScriptDelayLikeWrk|TestScriptHTTPSDelayStop|TestTBFSaturated|TestSetGlobal.*|TestDelayRTT|TestDelayRate)$$
#   internal/cli     TestLab, TestTuneLab (the seed cases loaded before and
#                    after their fix, compared; seed 000's capacity before
#                    and after its plan), TestRun* (loads judged
#                    from both hosts' counters), TestLight (capacity
#                    through a tbf, the dependency tests' round trips,
#                    the pools' capacity searches: light loads six at a
#                    time), TestPaired (22 tests four at a time),
#                    TestCheckTLSHandshakes (a
#                    server's CPU share in check's profile), the capacity searches
#                    (TestCapacity* of the cli: loads up to a knee),
#                    TestLabPortSearch (a lab run's profile),
#                    TestPaired/MergeWorkers*, /MergeRunWorkers,
#                    TestLight/CapacityWorkers and /CapacityKubernetes
#                    (workers started together,
#                    their rate and the knee judged), TestWrkCompatible (beside
#                    wrk), TestPrometheusAlerts, TestLabCleanAfterKill and
#                    TestRunSeveralFaults (nf_conntrack_max)
#   internal/layer   TCP beside iperf3 and through a tbf with slow joins,
#                    UDP loss through nft
#   internal/load    the open-loop rate, the stall in p99, Req/Sec
#                    samples, the ramp, scripts' delays beside wrk
#   internal/collect a tbf's rate and drops
#   internal/lab     TestSetGlobal* (a host-wide setting), TestDelayRTT and
#                    TestDelayRate (the delay element's round trip and rate)
#
# Each pass's output is go test's (gotestsum's standard-quiet: a line a
# package, a failing test's log in full); every test's time goes to
# TESTTIMES, from which `make slowest` lists the slowest.
test:
	@rm -rf $(TESTTIMES)
	@$(MAKE) --no-print-directory -j2 --output-sync=recurse deps lint-build
	@$(MAKE) --no-print-directory -j3 --output-sync=recurse test-parallel fuzz deploy-check
	@$(MAKE) --no-print-directory test-measuring
	@$(MAKE) --no-print-directory slowest

lint-build:
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory build

TESTTIMES = bin/test-times
GOTEST = mkdir -p $(TESTTIMES) && $(TOOL) gotestsum --format standard-quiet --hide-summary skipped --jsonfile $(TESTTIMES)/$@.json --

test-parallel:
	$(GOTEST) -count=1 -vet=off -p 4 -parallel 4 -timeout 30m -skip '$(MEASURING)' ./...

test-measuring:
	$(GOTEST) -count=1 -vet=off -p 1 -parallel 2 -timeout 45m -run '$(MEASURING)' ./...

# The ten slowest tests of the last passes (a test's time holds its
# subtests'), slowest first.
slowest:
	@echo "The ten slowest tests:"
	@cat $(TESTTIMES)/*.json | $(TOOL) gotestsum tool slowest | awk 'index($$2, "/") == 0 { sub("^github.com/netdoctor/netdoctor/", "", $$1); print "  " $$0 }' | head -10

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
# fuzzed for FUZZTIME each (about 15 s in all once built). Their seeds and
# testdata/fuzz corpora run with every go test; here new inputs are
# tried. A crasher is written to the package's testdata/fuzz/NAME: fix
# the code, keep the file, commit both. Minimizing a large input may take
# a minute, so it is cut short here.
#
# The budget is a count of executions, not a duration: with a duration,
# Go 1.26's fuzz coordinator can report its own deadline as a failure
# ("context deadline exceeded", no input written: go.dev/issue/75804,
# fixed in Go 1.27), as one CI run did. 10000 executions take under a
# second to 4 s a target here (2 600 to 47 000 a second), beside the
# first test pass (make test); most of the step is the instrumented
# builds. 30000 made the fuzzing, not the tests, the longer of the two
# (154 s against 135). A target slower than that has its own count after
# an @ (FuzzLoadObject measures each input's allocations, which stops the
# world: about 800 a second; FuzzReadBundle decodes whole bundles, 250 to
# 1400 a second).
#
# Each run starts from what a fresh machine has: the seeds and
# testdata/fuzz. The inputs go test keeps between runs in its cache
# (GOCACHE/fuzz) grew run after run on a machine that runs CI often, and
# each is run again before any new one: FuzzReadBundle's 369 took 29 s
# (CI run 31), the fuzzing the longest step beside the first pass. Only
# netdoctor's own are removed.
FUZZTIME ?= 10000x
FUZZ = FuzzReadPlan:./internal/tune FuzzReadInput:./internal/tune FuzzRead:./internal/report FuzzParseSyslog:./internal/kmsg \
	FuzzRead:./internal/evidence FuzzReadBundle:./internal/cli@3000x FuzzScanBuild:./internal/nginx FuzzDecode:./internal/perf FuzzSummarize:./internal/cpuprof \
	FuzzDecodeEntry:./internal/conntrack \
	FuzzDecodeTCPInfo:./internal/sockdiag FuzzDecodeConn:./internal/sockdiag FuzzHist:./internal/load FuzzLoadObject:./internal/symtab@2000x \
	FuzzDecodeResponse:./internal/phpfpm FuzzParse:./internal/haproxy
fuzz:
	@rm -rf "$$(go env GOCACHE)/fuzz/github.com/netdoctor/netdoctor"
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
