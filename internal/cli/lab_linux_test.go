package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// labNeeds skips unless root with every server the scenarios start.
func labNeeds(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the lab needs root: it creates network namespaces")
	}
	fpm := false
	for _, name := range lab.FPMNames() {
		_, err := exec.LookPath(name)
		_, serr := os.Stat("/usr/sbin/" + name)
		fpm = fpm || err == nil || serr == nil
	}
	if !fpm {
		t.Skip("php-fpm not installed (scripts/deps.sh installs it)")
	}
	for _, bin := range []string{"nginx", "dnsmasq", "redis-server", "hping3", "nft", "python3", "haproxy"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err := os.Stat("/usr/sbin/" + bin); err != nil {
				t.Skipf("%s not installed (scripts/deps.sh installs it)", bin)
			}
		}
	}
	if _, err := os.Stat("/usr/lib/nginx/modules/ngx_http_lua_module.so"); err != nil {
		t.Skip("libnginx-mod-http-lua not installed (scripts/deps.sh installs it)")
	}
}

// labResult is one `lab run`: its output and its reports.
type labResult struct {
	code          int
	out           string
	before, after *runJSON
	// twin is before's run diagnosed from an agent (--agent-twin).
	twin *runJSON
}

func labRunCmd(t *testing.T, args ...string) *labResult {
	t.Helper()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), append([]string{"lab", "run", "--out", out}, args...), &stdout, &stderr)
	r := &labResult{code: code, out: stdout.String() + stderr.String()}
	if code != 0 {
		t.Fatalf("lab run %v: exit %d\n%s", args, code, r.out)
	}
	read := func(name string) *runJSON {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			return nil
		}
		var j runJSON
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return &j
	}
	r.before, r.after, r.twin = read("before.json"), read("after.json"), read("before.agent.json")
	if slices.Contains(args, "--agent-twin") && r.twin == nil {
		t.Fatalf("lab run %v: no before.agent.json\n%s", args, r.out)
	}
	if r.before == nil {
		t.Fatalf("no before.json\n%s", r.out)
	}
	return r
}

// findingLines are the run's findings, a line each with its evidence:
// what a failing test shows of a run whose text it did not keep.
func findingLines(r *runJSON) string {
	var b strings.Builder
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "  %s %s %s: %s\n", f.Status, f.Severity, f.ID, f.Title)
		for _, e := range f.Evidence {
			fmt.Fprintf(&b, "      %s\n", e.Text)
		}
	}
	return b.String()
}

func activeIDs(r *runJSON) []string {
	var ids []string
	for _, f := range r.Findings {
		if f.Status == report.Active {
			ids = append(ids, string(f.Severity)+" "+string(f.ID))
		}
	}
	return ids
}

// stageIDs is every finding a scenario's faults raise, at any stage.
func stageIDs(sc *lab.Scenario) []report.FindingID {
	ids := slices.Clone(sc.Reports)
	for _, st := range sc.Stages {
		ids = append(ids, st.Reports...)
	}
	return ids
}

// TestLab runs every scenario as `netdoctor lab run NAME --fixed` does
// and holds each to its doc: the seed's findings reported active, with
// evidence from the run; after the fix none of them active and the
// service better off; the healthy control without a critical finding,
// and the fixed seed 000 within 10% of its throughput. Then nothing of
// any lab may be left on the machine.
func TestLab(t *testing.T) {
	labNeeds(t)
	for name := range agentFamilies {
		if !slices.ContainsFunc(lab.Scenarios, func(sc lab.Scenario) bool { return sc.Name == name }) {
			t.Fatalf("agentFamilies names %q, which is no scenario", name)
		}
	}
	before := hostState(t)
	t.Cleanup(func() { wantClean(t, before) })

	// The negative control has no finding at all, active or latent: a
	// tool that finds something everywhere is not listened to.
	healthy := labRunCmd(t, "healthy")
	for _, f := range healthy.before.Findings {
		t.Errorf("healthy: %s %s %s: %s %+v", f.Severity, f.Status, f.ID, f.Title, f.Evidence)
	}
	if healthy.before.Load.Errors.Timeout+healthy.before.Load.Errors.Connect > 0 || healthy.before.Load.Status["2xx"] != healthy.before.Load.Requests {
		t.Errorf("healthy: errors %+v, status %v\n%s", healthy.before.Load.Errors, healthy.before.Load.Status, healthy.out)
	}
	t.Logf("healthy: %.0f req/s", healthy.before.Load.RPS)
	healthyRPS.Store(healthy.before.Load.RPS)
	healthyRun.Store(healthy.before)
	// Through an agent alone too (lab run --agent): nothing found
	// either way, and the lab's --agent itself in use.
	t.Run("healthy/agent", func(t *testing.T) { // agentFamilies
		agentParity(t, "healthy", healthy.before, labRunCmd(t, "healthy", "--agent").before, func() (*runJSON, *runJSON) {
			return labRunCmd(t, "healthy").before, labRunCmd(t, "healthy", "--agent").before
		})
	})

	var fixedSeed000 float64
	scenario := func(t *testing.T, sc *lab.Scenario) {
		args := []string{sc.Name, "--fixed"}
		_, twin := agentFamilies[sc.Name]
		if twin {
			args = append(args, "--agent-twin")
		}
		r := labRunCmd(t, args...)
		wantActive(t, r.before, r.out, "", sc.Reports...)
		if t.Failed() {
			return
		}
		if check := labEvidence[sc.Name]; check != nil {
			check(t, r.before)
		}
		for _, id := range sc.Reports {
			if f := findActive(r.before, id); f != nil {
				t.Logf("%s: %s", id, f.Title)
			}
		}
		if twin {
			agentParity(t, sc.Name, r.before, r.twin, func() (*runJSON, *runJSON) {
				r := labRunCmd(t, sc.Name, "--agent-twin")
				return r.before, r.twin
			})
		}
		for _, id := range stageIDs(sc) {
			f := findActive(r.after, id)
			switch {
			case f == nil:
			case slices.Contains(sc.Persists, id) && f.Severity != report.Critical:
				t.Logf("%s persists after the fix, as documented: %s", id, f.Title)
			default:
				t.Errorf("after the fix, %s is still active: %s %+v", id, f.Title, f.Evidence)
			}
		}
		b, a := r.before.Load, r.after.Load
		t.Logf("%s: before %.0f req/s p50 %v, %d errors; fixed %.0f req/s p50 %v, %d errors; findings before %v, after %v",
			sc.Name, b.RPS, b.Latency.P50, failures(b), a.RPS, a.Latency.P50, failures(a), activeIDs(r.before), activeIDs(r.after))
		better := a.RPS > 1.5*b.RPS || failures(a)*10 < failures(b) || a.Latency.P50*2 < b.Latency.P50
		if !better {
			t.Errorf("the fix did not help: before %.0f req/s p50 %v %d failures, after %.0f req/s p50 %v %d failures",
				b.RPS, b.Latency.P50, failures(b), a.RPS, a.Latency.P50, failures(a))
		}
		if sc.Name == "nginx-php-throughput" {
			fixedSeed000 = a.RPS
		}
		if !strings.Contains(r.out, "Findings gone:") || !strings.Contains(r.out, sc.Name+".fixed.html") {
			t.Errorf("no before/after comparison or report paths:\n%s", r.out)
		}
	}
	var sideBySide []subtest
	for i := range lab.Scenarios {
		sc := &lab.Scenarios[i]
		st := subtest{sc.Name, func(t *testing.T) { scenario(t, sc) }}
		switch _, beside := besideAnother[sc.Name]; {
		case sc.Name == "healthy":
		case beside:
			sideBySide = append(sideBySide, st)
		default:
			t.Run(sc.Name, st.run)
		}
	}

	// Fixed seed 000 against healthy (--stage 6 is the fixed lab).
	t.Run("nginx-php-throughput/vs-healthy", func(t *testing.T) {
		if fixedSeed000 == 0 {
			t.Skip("nginx-php-throughput failed")
		}
		wantNearHealthy(t, "fixed seed 000", fixedSeed000, healthy.before.Load.RPS, func() float64 {
			return labRunCmd(t, "nginx-php-throughput", "--stage", "6").before.Load.RPS
		})
	})

	// Seed 003's second stage: with the backlog fixed, the log lock.
	t.Run("accept-queue-backlog/stage2", func(t *testing.T) {
		r := labRunCmd(t, "accept-queue-backlog", "--stage", "2", "--fixed")
		f := wantActive(t, r.before, r.out, "server", "app-slow")["app-slow"]
		if f != nil && !fixHas(f, "file lock") {
			t.Errorf("app-slow does not name the file lock: %+v", f.Fix)
		}
		if findActive(r.before, "accept-queue-overflow") != nil {
			t.Errorf("stage 2 has the backlog fixed, yet accept-queue-overflow:\n%s", r.out)
		}
		if f := findActive(r.after, "app-slow"); f != nil && fixHas(f, "file lock") {
			t.Errorf("after removing the log line, still a file lock: %+v", f.Evidence)
		}
		if a, b := r.after.Load.Latency.P50, r.before.Load.Latency.P50; a*2 > b {
			t.Errorf("p50 %v → %v: removing the lock should at least halve it", b, a)
		}
	})

	// Three at a time, each in a subtest of its own; first, as the
	// longest (a run, a plan and its verify: 22 s), netdoctor's own plan
	// for nginx-nagle (TestTuneLab's, whose seed 000 must run alone).
	runTogether(t, 3, append([]subtest{{"tune/nginx-nagle", testTuneNagle}}, sideBySide...))
}

// besideAnother are the scenarios TestLab runs three at a time, last:
// 110 s one after the other, 45 s so. Each lab has
// namespaces, veths, a subnet and a journal of its own (lab.Run names
// them apart), and none of these reaches beyond its namespaces or needs
// the host's CPUs idle. What each is held to stands beside another
// lab's load as it stands on a busy CI machine: its findings come from
// its own namespaces' counters, sockets, configuration and servers, and
// its fix helps by far more than a shared CPU takes away (errors to
// none, or ten to a thousand times the throughput: the test logs both).
// syn-flood's flood (2000 SYNs a second) writes the host's kernel log
// ("Possible SYN flooding on port ADDR:80"), which the rule matches by
// its listener's address and port, so that a neighbour's overflow is
// not read as its own (with the port alone, it was).
//
// The others run alone, one after the other, for what beside another
// lab failed or would: nginx-php-throughput and conntrack-sawtooth set
// the host-wide nf_conntrack_max; app-slow (dns-slow-resolver,
// ping-ptr-timeout, and accept-queue-backlog's second stage) is the
// server holding requests while nothing else explains the time, and a
// neighbour that saturates a CPU explains it (cpu-saturated): beside
// the others, ping-ptr-timeout was named app-slow once through its
// threads blocked off CPU 100 % of their busy time, and missed it the
// next time with a CPU 91 % busy (CI run 39); stall-tenth's slow tail is
// rightly explained by cpu-saturated when a neighbour saturates the
// CPUs; haproxy-reset's and kv-redis's fix doubles the throughput and
// halves p50, about the "better" bounds of 1.5 and 2 times, so a shared
// CPU in one of their two runs would decide it; the healthy control
// must find nothing at all.
var besideAnother = map[string]string{
	"nginx-nagle":          "p50 44 ms → 0.4 ms",
	"dns-no-resolver":      "errors → none",
	"accept-queue-backlog": "errors → none",
	"python-pool":          "79 → 979 req/s",
	"python-dns":           "6 → 6.5k req/s",
	"proxy-churn":          "errors → none",
	"syn-flood":            "errors → none",
}

// agentFamilies are the scenarios whose first run is seen through an
// agent too (lab run --agent-twin: an agent in the server's namespace
// beside the namespace's own sampling, the same load diagnosed twice),
// one for each kind of server-side evidence the agent carries instead
// of the namespace; the others' findings come from the same evidence as
// one of these. Healthy's agent run is a run of its own (lab run
// --agent). A run of their own for each took 8 s, 60 s of CI, and
// compared two loads' luck as well as two kinds of evidence.
var agentFamilies = map[string]string{
	"healthy":              "nothing found either way",
	"nginx-php-throughput": "conntrack, accept queues, php-fpm's pool, upstream churn, ports",
	"nginx-nagle":          "nginx's configuration file:line, socket flags",
	"dns-no-resolver":      "the server namespace's resolv.conf",
	"ping-ptr-timeout":     "PTR probes, threads waiting, app-slow",
	"python-dns":           "resolver probes through loss",
	"syn-flood":            "SYN counters and the listener's SYN queue",
	"kv-redis":             "TIME_WAIT buckets from the kernel log, redis",
	"python-pool":          "a thread pool found from its threads",
	"stall-tenth":          "no server-side evidence: unexplained distress",
	// Left out, with what covers them: conntrack-sawtooth (conntrack:
	// nginx-php-throughput; TestPrometheusAlerts on the agent),
	// dns-slow-resolver (resolver probes: python-dns, ping-ptr-timeout),
	// accept-queue-backlog (accept queues: nginx-php-throughput),
	// haproxy-reset and proxy-churn (churn: nginx-php-throughput, kv-redis).
}

// agentParity holds the scenario's run with its server's side from an
// agent in the server namespace (over the veth, no setns) to the same
// active findings as through the namespace, and the same servers
// behind the port. A difference that also shows between two runs of
// one kind is the scenario's noise, not the agent's: on a mismatch both
// kinds run once more (again), and only a difference that neither
// repetition explains fails.
//
// A finding of one of the scenario's later stages (not among the ones
// its all-at-once run must report) is compared only in the log: which of
// the stacked limits binds first is the load's luck, not the evidence's.
// nginx-php-throughput's php-fpm pool (pm.max_children 5) fills only
// when enough FastCGI connections get one of the 51 ports at once. From
// the command line that was 1 run in 6 through the namespace and 7 in 10
// through the agent; inside this test, 3 in 3 and 0 in 3, the other way
// round: two pairs split the same way often enough to fail CI on noise.
func agentParity(t *testing.T, name string, direct, a *runJSON, again func() (direct, agent *runJSON)) {
	t.Helper()
	i := slices.IndexFunc(lab.Scenarios, func(sc lab.Scenario) bool { return sc.Name == name })
	if i < 0 {
		t.Fatalf("agentParity: no scenario %q", name)
	}
	sc := &lab.Scenarios[i]
	var later []report.FindingID
	for _, id := range stageIDs(sc) {
		if !slices.Contains(sc.Reports, id) {
			later = append(later, id)
		}
	}
	if _, ok := besideAnother[name]; ok {
		// Beside another lab, how busy the host's CPUs were is that
		// lab's timing, not this one's evidence: both kinds read it
		// from the same host-wide counters (/proc/stat, each thread's
		// run delay), and its parity is held where a scenario runs
		// alone (healthy, nginx-php-throughput, stall-tenth, kv-redis).
		later = append(later, rules.CPUSaturated, rules.RunQueueContention)
	}
	idSet := func(r *runJSON) string { return idSetBut(r, later) }
	// What the scenario must report, the agent's run must too; a load
	// that did not reach a limit in one run (nginx-php-throughput's
	// accept queue, with the agent's own CPU in the server namespace,
	// once in CI at 12.9k req/s where the namespace's runs overflowed
	// it twice) is judged on the second pair's agent run as well.
	missing := func(r *runJSON) []report.FindingID {
		var out []report.FindingID
		for _, id := range sc.Reports {
			if findActive(r, id) == nil {
				out = append(out, id)
			}
		}
		return out
	}
	if d, g := idSetBut(direct, nil), idSetBut(a, nil); d != g {
		t.Logf("%s: with later stages' findings, through the namespace %s, through the agent %s", name, d, g)
	}
	var agent string
	for _, s := range a.Sides {
		if s.Name == "server" {
			agent = s.Agent
		}
	}
	if !strings.HasPrefix(agent, "http://") {
		t.Errorf("%s --agent: the server side does not name its agent: %+v", name, a.Sides)
	}
	if got, want := serverKinds(a), serverKinds(direct); got != want {
		t.Errorf("%s --agent: servers %q, through the namespace %q", name, got, want)
	}
	want, got := idSet(direct), idSet(a)
	if want == got && len(missing(a)) == 0 {
		return
	}
	direct2, a2 := again()
	if m := missing(a); len(m) > 0 {
		if m2 := missing(a2); len(m2) > 0 {
			t.Errorf("%s --agent: %v not reported active in two runs: %s, then %s", name, m2, got, idSet(a2))
		} else {
			t.Logf("%s --agent: %v not active in the first run (%s), active in the second (%s)", name, m, got, idSet(a2))
		}
	}
	if idSet(direct2) == idSet(a2) {
		t.Logf("%s: first pair differed (%s | %s), the second agrees: %s", name, want, got, idSet(a2))
		return
	}
	noise := map[string]bool{}
	for _, pair := range [][2]string{{want, idSet(direct2)}, {got, idSet(a2)}} {
		for _, id := range symdiff(pair[0], pair[1]) {
			noise[id] = true
		}
	}
	for _, pair := range [][2]string{{want, got}, {idSet(direct2), idSet(a2)}} {
		for _, id := range symdiff(pair[0], pair[1]) {
			if !noise[id] {
				t.Errorf("%s: active findings through the namespace %s, through the agent %s; again %s and %s: %s differs every time", name, want, got, idSet(direct2), idSet(a2), id)
			}
		}
	}
}

// idSetBut is the run's active finding IDs but those in but, sorted, one
// string.
func idSetBut(r *runJSON, but []report.FindingID) string {
	var ids []string
	for _, f := range r.Findings {
		if f.Status == report.Active && !slices.Contains(but, f.ID) && !slices.Contains(ids, string(f.ID)) {
			ids = append(ids, string(f.ID))
		}
	}
	slices.Sort(ids)
	return "[" + strings.Join(ids, " ") + "]"
}

// symdiff is what one idSet has and the other not.
func symdiff(a, b string) []string {
	as, bs := strings.Fields(strings.Trim(a, "[]")), strings.Fields(strings.Trim(b, "[]"))
	var out []string
	for _, id := range as {
		if !slices.Contains(bs, id) {
			out = append(out, id)
		}
	}
	for _, id := range bs {
		if !slices.Contains(as, id) {
			out = append(out, id)
		}
	}
	return out
}

// serverKinds names the servers found behind the port, with their
// configuration files.
func serverKinds(r *runJSON) string {
	var out []string
	for _, s := range r.Servers {
		if s.Role == "dependency" {
			// Found from the connections traced during the load, which
			// the agent does not trace yet (docs/findings.md).
			continue
		}
		// Each lab has a directory of its own.
		out = append(out, s.Role+" "+s.Kind+" "+labDir.ReplaceAllString(s.Config, "LAB"))
	}
	return strings.Join(out, ", ")
}

var labDir = regexp.MustCompile(`/[^ ]*/netdoctor-lab-[^/]+`)

// wantChain: the front server's dependency table names the dependency
// by its owner, from the front's own connections, and the dependency is
// diagnosed as a server of the run too.
func wantChain(t *testing.T, r *runJSON, front, owner string) {
	t.Helper()
	for _, s := range r.Servers {
		if s.Kind != front {
			continue
		}
		for _, d := range s.Deps {
			if !strings.HasPrefix(d.Owner, owner+" (pid ") || !d.Observed || d.Conns+d.New == 0 {
				continue
			}
			for _, o := range r.Servers {
				if o.Addr == d.Addr && strings.HasPrefix(o.Kind, strings.TrimSuffix(owner, "-server")) {
					return
				}
			}
			t.Errorf("%s waits on %s (%s), which is not among the run's servers: %s", front, d.Addr, d.Owner, jsonOf(r.Servers))
			return
		}
	}
	t.Errorf("no %s → %s in the dependency tables: %s", front, owner, jsonOf(r.Servers))
}

// labEvidence holds scenarios to the evidence that proves their finding,
// beyond its ID: what a user reads to believe it.
var labEvidence = map[string]func(t *testing.T, r *runJSON){
	// The headline is the cause that hurt most: the churn and the ports
	// it exhausts fail 70 % of the requests, the accept queue almost none.
	"nginx-php-throughput": func(t *testing.T, r *runJSON) {
		if len(r.Findings) == 0 || r.Findings[0].ID != rules.UpstreamConnectionChurn || !strings.Contains(r.Verdict, "new connection per request") {
			t.Errorf("headline %q, first finding %v: want the churn that explains most failures", r.Verdict, r.Findings[0].ID)
		}
		wantChain(t, r, "nginx", "php-fpm")
	},
	// Seed 004: the chain from nginx's connections into redis.
	"kv-redis": func(t *testing.T, r *runJSON) { wantChain(t, r, "nginx", "redis-server") },
	// A pool no configuration describes, from threads and sockets: its
	// size, the requests queued unread, the latency decomposed.
	"python-pool": func(t *testing.T, r *runJSON) {
		f := findActive(r, rules.WorkerPoolExhausted)
		for _, want := range []string{"python3 (pid", "4 worker threads busy", "requests waited unread in their connections", "× the service time"} {
			if f != nil && !evidenceHas(f, want) {
				t.Errorf("no %q in %+v", want, f.Evidence)
			}
		}
		// Where the time went: unread in the server's sockets, waiting
		// for a worker (91 % of the p50 measured), not "outside".
		if ts := r.TimeSplit; ts == nil || ts.P50.Share(report.BucketUnread) < 0.5 {
			t.Errorf("time split %+v: want the p50 mostly unread in the server's sockets", ts)
		}
	},
	// A lossy resolver: its loss rate, what glibc makes of it, the
	// workers waiting on it; not a dead one.
	"python-dns": func(t *testing.T, r *runJSON) {
		if findActive(r, rules.DNSMisconfigured) != nil {
			t.Errorf("a resolver that answers most queries called misconfigured")
		}
		var loss, waits bool
		for _, f := range r.Findings {
			if f.ID == rules.DNSSlow && f.Status == report.Active {
				loss = loss || evidenceHas(&f, "lost (") && evidenceHas(&f, "stall 5 s")
				waits = waits || evidenceHas(&f, "waiting in a name lookup")
			}
		}
		if !loss || !waits {
			t.Errorf("dns-slow without its loss rate (%v) or the workers waiting on it (%v)", loss, waits)
		}
	},
	// Closed with resets: churn, and no port finding sized on TIME_WAIT.
	"haproxy-reset": func(t *testing.T, r *runJSON) {
		if f := findActive(r, rules.UpstreamConnectionChurn); f != nil && (!strings.Contains(f.Title, "haproxy") || !strings.Contains(f.Title, "reset")) {
			t.Errorf("churn %q: want haproxy closing with a reset", f.Title)
		}
		for _, f := range r.Findings {
			if f.ID == rules.EphemeralPortExhaustion {
				t.Errorf("ports judged as if TIME_WAIT held them: %s %+v", f.Title, f.Fix)
			}
		}
	},
	// The ports ran out, and their cause is found without a config,
	// sized from the connects attempted.
	"proxy-churn": func(t *testing.T, r *runJSON) {
		if f := findActive(r, rules.EphemeralPortExhaustion); f != nil && f.CausedBy != rules.UpstreamConnectionChurn {
			t.Errorf("port exhaustion not tied to its cause: caused_by %q", f.CausedBy)
		}
		if f := findActive(r, rules.UpstreamConnectionChurn); f != nil && !evidenceHas(f, "connects a second were attempted") {
			t.Errorf("churn without the attempted connects: %+v", f.Evidence)
		}
	},
	// The fault no rule covers is not HEALTHY: UNEXPLAINED, or
	// UNHEALTHY when another finding names a cause.
	"stall-tenth": func(t *testing.T, r *runJSON) {
		if strings.HasPrefix(r.Verdict, "HEALTHY") || !strings.HasPrefix(r.Verdict, "UNEXPLAINED") && !strings.HasPrefix(r.Verdict, "UNHEALTHY") {
			t.Errorf("verdict %q", r.Verdict)
		}
		if f := findActive(r, rules.UnexplainedDistress); f != nil && !evidenceHas(f, "slow tail") {
			t.Errorf("distress without its numbers: %+v", f.Evidence)
		}
	},
}

// wantNearHealthy holds x within 10% of the healthy control's
// throughput. Each pair is measured back to back, so what else the
// machine ran weighs on both alike; a shared machine's noise still moves
// one 5 s run by a third, so a pair below 90% is measured again (up to
// three pairs): the tuned lab must reach 90% of healthy over all pairs
// together or within one pair, and a lab that never does (a plan that
// leaves a fault) fails every pair. The first pair's healthy run is
// TestLab's, minutes before x when TestTuneLab asks: the second pair is
// x with a healthy run made now (healthy read 23.8k req/s in TestLab and
// 16.9k beside x in CI run 31, where x read 16.8k), and only the third
// measures x again (again: a new lab, planned and verified, 30 s).
func wantNearHealthy(t *testing.T, what string, x, healthy float64, again func() float64) {
	t.Helper()
	xs, hs := []float64{x}, []float64{healthy}
	ratio := func() float64 {
		var x, h float64
		for i := range xs {
			x, h = x+xs[i], h+hs[i]
		}
		return x / h
	}
	best := func() float64 {
		var b float64
		for i := range xs {
			b = max(b, xs[i]/hs[i])
		}
		return b
	}
	for len(xs) < 3 && ratio() < 0.9 && best() < 0.9 {
		hs = append(hs, labRunCmd(t, "healthy").before.Load.RPS)
		if len(xs) == 1 {
			xs = append(xs, x)
		} else {
			xs = append(xs, again())
		}
	}
	t.Logf("%s %.0f req/s, healthy %.0f req/s: %.0f%% of healthy's throughput, %.0f%% in the best pair", what, xs, hs, 100*ratio(), 100*best())
	if ratio() < 0.9 && best() < 0.9 {
		t.Errorf("%s at %.0f%% of healthy's throughput over %d alternated pairs (%.0f%% in the best), want ≥ 90%%", what, 100*ratio(), len(xs), 100*best())
	}
}

// healthyRPS is the healthy control's throughput, once TestLab measured
// it: TestTuneLab compares with it rather than build and load the same
// lab again (wantNearHealthy measures fresh pairs when one is not near).
var healthyRPS atomicFloat

// healthyRun is the healthy control's run, once TestLab made it: the
// tests that hold a healthy lab's run to their own quiet read it rather
// than load the same lab again.
var healthyRun atomic.Pointer[runJSON]

type atomicFloat struct{ bits atomic.Uint64 }

func (a *atomicFloat) Store(v float64) { a.bits.Store(math.Float64bits(v)) }
func (a *atomicFloat) Load() float64   { return math.Float64frombits(a.bits.Load()) }

// healthyThroughput is the healthy control's throughput: TestLab's, or
// measured now.
func healthyThroughput(t *testing.T) float64 {
	if v := healthyRPS.Load(); v > 0 {
		t.Logf("healthy: %.0f req/s, as TestLab measured it", v)
		return v
	}
	return labRunCmd(t, "healthy").before.Load.RPS
}

// failures counts requests that failed: errors and non-2xx/3xx.
func failures(l *loadJSON) uint64 {
	return l.Errors.Total() + l.Requests - l.Status["2xx"] - l.Status["3xx"]
}

// hostSnapshot is what a lab may change and must restore.
type hostSnapshot struct {
	conntrackMax string
	netns        string
	// leftovers is every lab namespace, journal, directory, process and
	// veth on the host, each as one string: what was there before a test
	// is not the test's to answer for. A lab killed with the run that
	// built it (a session or CI job stopped mid-test) leaves these for
	// `lab clean`, which may remove them while a test runs.
	leftovers map[string]bool
}

// Only the labs of `lab run` (IDs "L…") count: other test packages build
// labs of their own at the same time.
func hostState(t *testing.T) hostSnapshot {
	t.Helper()
	b, _ := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_max")
	out, _ := exec.Command("ip", "netns", "list").Output()
	var ns []string
	left := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "nd-L") {
			ns = append(ns, f[0])
			left["namespace "+f[0]] = true
		}
	}
	for _, pattern := range []string{filepath.Join(lab.StateDir, "L*.json"), filepath.Join(os.TempDir(), "netdoctor-lab-L*"), "/etc/netns/nd-L*"} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			left["file "+p] = true
		}
	}
	if out, err := exec.Command("pgrep", "-a", "-f", "netdoctor-lab-L|hping3|lab serve").Output(); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l != "" {
				left["process "+l] = true
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 1 && (strings.HasPrefix(f[1], "nds-L") || strings.HasPrefix(f[1], "ndc-L")) {
				left["veth "+strings.TrimSuffix(f[1], ":")] = true
			}
		}
	}
	return hostSnapshot{conntrackMax: strings.TrimSpace(string(b)), netns: strings.Join(ns, " "), leftovers: left}
}

// heldByLiveLab: another test package's lab, running now, changed it.
func heldByLiveLab(path string) bool {
	_, ok := lab.LiveChanges()[path]
	return ok
}

// wantClean fails when anything a lab creates is left that was not on
// the host before: namespaces (and with them veths, qdiscs, nft tables),
// journals, files, processes, or a changed global sysctl.
func wantClean(t *testing.T, was hostSnapshot) {
	t.Helper()
	now := hostState(t)
	// A dead lab's journal on the host before may hold the sysctl, and
	// `lab clean` rightly restores it: only a clean host before decides.
	if now.conntrackMax != was.conntrackMax && !heldByLiveLab("/proc/sys/net/netfilter/nf_conntrack_max") && len(was.leftovers) == 0 {
		t.Errorf("nf_conntrack_max %s, was %s", now.conntrackMax, was.conntrackMax)
	}
	var left []string
	for k := range now.leftovers {
		if !was.leftovers[k] {
			left = append(left, k)
		}
	}
	slices.Sort(left)
	for _, k := range left {
		t.Errorf("left behind: %s", k)
	}
	if len(was.leftovers) > 0 {
		t.Logf("on the host before the test, not checked: %v", slices.Sorted(maps.Keys(was.leftovers)))
	}
}

// TestLabCleanAfterKill: a lab run killed with SIGKILL cannot clean up;
// `lab clean` must then remove its namespaces and processes and restore
// nf_conntrack_max from the journal.
func TestLabCleanAfterKill(t *testing.T) {
	labNeeds(t)
	was := hostState(t)
	t.Cleanup(func() { wantClean(t, was) })
	cmd := exec.Command(os.Args[0], "lab", "run", "--out", t.TempDir(), "conntrack-sawtooth")
	cmd.Env = append(os.Environ(), "ND_HELPER=cli")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the lab is up and the global changed: the load running.
	if !poll.Wait(2*time.Minute, func() bool { return strings.Contains(out.String(), "Running ") }) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("lab did not start:\n%s", out.String())
	}
	journal := filepath.Join(lab.StateDir, fmt.Sprintf("L%d.json", cmd.Process.Pid%100000))
	if b, err := os.ReadFile(journal); err != nil || !strings.Contains(string(b), "nf_conntrack_max") {
		t.Errorf("no journal of nf_conntrack_max while the lab runs: %v %s", err, b)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if ns := hostState(t).netns; !strings.Contains(ns, "nd-") {
		t.Fatalf("nothing left to clean after SIGKILL? namespaces %q", ns)
	}
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"lab", "clean"}, &stdout, &stderr); code != 0 {
		t.Fatalf("lab clean: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	wants := []string{"deleted namespace nd-L"}
	if !heldByLiveLab("/proc/sys/net/netfilter/nf_conntrack_max") {
		wants = append(wants, "restored /proc/sys/net/netfilter/nf_conntrack_max to "+was.conntrackMax)
	}
	for _, want := range wants {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("lab clean said nothing of %q:\n%s", want, stdout.String())
		}
	}
	// A second clean finds nothing.
	stdout.Reset()
	if code := Run(context.Background(), []string{"lab", "clean"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "nothing to clean") {
		t.Errorf("second clean: exit %d: %s", code, stdout.String())
	}
}

// TestLabBadInput: one line and exit 2 for what cannot run.
func TestLabBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"lab"}, {"lab", "frob"}, {"lab", "run"}, {"lab", "run", "no-such-case"},
		{"lab", "run", "healthy", "--fixed"}, {"lab", "run", "nginx-nagle", "--stage", "3"},
		{"lab", "run", "nginx-nagle", "--stage", "2", "--fixed"}, {"lab", "run", "healthy", "--stage", "2"},
		{"lab", "list", "x"},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), args, &stdout, &stderr)
		if code != ExitUsage || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

// TestLabList: every scenario is listed, and -v documents each: its
// seed, faults, findings, fix and the article's figures.
func TestLabList(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"lab", "list", "-v"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, sc := range lab.Scenarios {
		i := strings.Index(stdout.String(), sc.Name+" — seed")
		if i < 0 {
			t.Errorf("%s not listed", sc.Name)
			continue
		}
		entry := stdout.String()[i:]
		if j := strings.Index(entry, "\n\n"); j > 0 {
			entry = entry[:j]
		}
		for _, want := range []string{"article:", "load:"} {
			if !strings.Contains(entry, want) {
				t.Errorf("%s: no %q in\n%s", sc.Name, want, entry)
			}
		}
		for _, id := range sc.Reports {
			if !strings.Contains(entry, string(id)) {
				t.Errorf("%s: %s not documented", sc.Name, id)
			}
		}
	}
}
