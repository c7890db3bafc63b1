package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/report"
)

// runCPU runs `netdoctor run ARGS --json -` in namespace ns against a
// server elsewhere.
func runCPU(t *testing.T, ns, args string) (*runJSON, *runJSON, string) {
	t.Helper()
	r, text := runRemote(t, ns, args)
	return r, r, text
}

// v1CPUGroup makes a cgroup v1 cpu group limited to quota per 100 ms
// period and removes it when the test ends (after the processes in it,
// which the test's later cleanups kill first).
func v1CPUGroup(t *testing.T, quota time.Duration) string {
	t.Helper()
	root := "/sys/fs/cgroup/cpu"
	if _, err := os.Stat(root + "/cpu.cfs_quota_us"); err != nil {
		t.Skip("no cgroup v1 cpu controller at /sys/fs/cgroup/cpu (the v2 form is tested from fixtures in internal/cgroup and internal/rules)")
	}
	dir := filepath.Join(root, fmt.Sprintf("ndtest-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The processes were killed by the cleanups registered after
		// this one; the group empties as they are reaped.
		var err error
		if !poll.Wait(10*time.Second, func() bool {
			err = os.Remove(dir)
			return err == nil || errors.Is(err, fs.ErrNotExist)
		}) {
			t.Errorf("cgroup %s left behind: %v", dir, err)
		}
	})
	if err := os.WriteFile(dir+"/cpu.cfs_quota_us", []byte(strconv.FormatInt(quota.Microseconds(), 10)), 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunCPUQuota: a CPU-bound server in a cgroup limited to 0.2 CPU on
// a host with CPUs to spare: the run names the quota throttling with
// its limit, splits the latency into mostly throttled time, and says
// what the profile cost.
func TestRunCPUQuota(t *testing.T) {
	ns := testNetns(t)
	group := v1CPUGroup(t, 20*time.Millisecond)
	h := startHelper(t, ns, "serve", "ND_SERVER=burn", "ND_ADDR=127.0.0.2:7400")
	if err := os.WriteFile(group+"/cgroup.procs", []byte(strconv.Itoa(h.cmd.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	r, c, text := runCPU(t, ns, "-c 8 -t 1 -d 4s --baseline 1s --tail 1s http://127.0.0.2:7400/")
	f := findActive(r, "cpu-quota-throttling")
	if f == nil {
		for _, s := range r.Servers {
			t.Logf("server %s %s: cgroup %+v", s.Kind, s.Addr, s.CGroup)
			for _, smp := range s.Samples {
				t.Logf("  %s %+v", smp.Time.Format("15:04:05.000"), smp.CPU)
			}
		}
		t.Fatalf("no cpu-quota-throttling; findings %+v\n%s", r.Findings, text)
	}
	name := filepath.Base(group)
	if !strings.Contains(f.Title, "0.2 CPU") || !itemHas(f, "cgroup v1 /"+name+" limits") || !itemHas(f, "cpu.cfs_quota_us 20000, cpu.cfs_period_us 100000") {
		t.Errorf("finding %s: %+v", f.Title, f.Evidence)
	}
	if a := f.Actions[0]; a.Kind != report.ActionCommand || !strings.HasSuffix(a.Command, "/"+name+"/cpu.cfs_quota_us") || !strings.Contains(strings.Join(f.Fix, "\n"), "GOMAXPROCS") {
		t.Errorf("fix %q", f.Fix)
	}
	if findActive(r, "app-slow") != nil {
		t.Errorf("app-slow beside the throttling: %+v", r.Findings)
	}
	if c.TimeSplit == nil || c.TimeSplit.P50.Share(report.BucketThrottled) < 0.3 {
		t.Errorf("the time split does not put the p50 mostly in throttling: %+v\n%s", c.TimeSplit, text)
	}
	if c.Profile == nil || c.Profile.Cost.Sampling <= 0 {
		t.Errorf("profile %+v (%s): want its cost", c.Profile, c.ProfileError)
	}
}

// TestRunHotFunction: a CPU-bound server's profile names its hottest
// function, burnRequest; the HTML report draws its flame graph in
// headless Chromium; --bundle keeps a pprof profile that go tool pprof
// opens.
func TestRunHotFunction(t *testing.T) {
	ns := testNetns(t)
	startHelper(t, ns, "serve", "ND_SERVER=burn", "ND_ADDR=127.0.0.2:7401")
	dir := t.TempDir()
	page, bundle := filepath.Join(dir, "run.html"), filepath.Join(dir, "run.json.gz")
	r, c, text := runCPU(t, ns, "-c 4 -t 1 -d 3s --baseline 1s --tail 1s --html "+page+" --bundle "+bundle+" http://127.0.0.2:7401/")
	if c.Profile == nil || len(c.Profile.Servers) == 0 || len(c.Profile.Servers[0].Top) == 0 {
		t.Fatalf("no profile of the server (%s)\n%s", c.ProfileError, text)
	}
	top := c.Profile.Servers[0].Top[0]
	if !strings.HasSuffix(top.Name, "cli.burnRequest") || top.Self < 0.3 {
		t.Errorf("hottest %+v, want cli.burnRequest; top %+v", top, c.Profile.Servers[0].Top)
	}
	if findActive(r, "cpu-quota-throttling") != nil {
		t.Errorf("throttling without a quota: %+v", r.Findings)
	}
	pprof := filepath.Join(dir, "run.pprof")
	if _, err := os.Stat(pprof); err != nil {
		t.Fatalf("no pprof profile beside the bundle: %v", err)
	}
	if gobin, err := exec.LookPath("go"); err == nil {
		out, err := exec.Command(gobin, "tool", "pprof", "-top", "-nodecount=5", pprof).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "burnRequest") {
			t.Errorf("go tool pprof -top: %v\n%s", err, out)
		}
	}
	dom := renderHTML(t, page)
	m := regexp.MustCompile(`<div id="flame" class="flame" data-frames="([0-9]+)"`).FindStringSubmatch(dom)
	if m == nil || m[1] == "0" || !strings.Contains(dom, "cli.burnRequest") {
		t.Errorf("the flame graph was not drawn (%v)", m)
	}
	if strings.Contains(dom, "<script src") {
		t.Errorf("the page fetches scripts")
	}
}

// TestRunContention: a server pinned to one CPU with a busy neighbour
// pinned there too: the run names the run-queue contention and the
// neighbour.
func TestRunContention(t *testing.T) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("taskset (util-linux) not installed")
	}
	ns := testNetns(t)
	pin := func(role string, env ...string) *helperProc {
		cmd := exec.Command(taskset, "-c", "0", "ip", "netns", "exec", ns, os.Args[0])
		cmd.Env = append(append(os.Environ(), "ND_HELPER="+role), env...)
		return startReady(t, cmd)
	}
	pin("serve", "ND_SERVER=burn", "ND_ADDR=127.0.0.2:7402")
	spin := pin("spin")
	r, _, text := runCPU(t, ns, "-c 4 -t 1 -d 4s --baseline 1s --tail 1s http://127.0.0.2:7402/")
	f := findActive(r, "run-queue-contention")
	if f == nil {
		for _, s := range r.Servers {
			for _, smp := range s.Samples {
				t.Logf("  %s %+v", smp.Time.Format("15:04:05.000"), smp.CPU)
			}
		}
		t.Logf("split %+v, profile others %+v", r.TimeSplit, r.Profile)
		t.Fatalf("no run-queue-contention; findings %+v\n%s", r.Findings, text)
	}
	if !itemHas(f, fmt.Sprintf("(pid %d)", spin.cmd.Process.Pid)) || !itemHas(f, "the 1 CPU(s) it may run on") {
		t.Errorf("the neighbour (pid %d) is not named: %+v", spin.cmd.Process.Pid, f.Evidence)
	}
	if findActive(r, "cpu-quota-throttling") != nil {
		t.Errorf("throttling without a quota: %+v", r.Findings)
	}
}

// TestRunCPUQuiet: a healthy server under a light load has neither
// throttling nor contention, and the report says what its profile cost.
func TestRunCPUQuiet(t *testing.T) {
	ns := testNetns(t)
	startHelper(t, ns, "serve", "ND_SERVER=fast", "ND_ADDR=127.0.0.2:7403")
	r, c, _ := runCPU(t, ns, "-c 2 -t 1 -R 200 -d 3s --baseline 1s --tail 1s http://127.0.0.2:7403/")
	for _, id := range []report.FindingID{"cpu-quota-throttling", "run-queue-contention", "app-slow"} {
		if f := findActive(r, id); f != nil {
			t.Errorf("%s on a healthy server: %s %+v", id, f.Title, f.Evidence)
		}
	}
	if c.Profile == nil || c.Profile.Cost.Sampling <= 0 || c.Profile.Cost.CoreShare >= 0.02 {
		t.Errorf("profile cost %+v (%s): want it reported, under 2%% of a core", c.Profile, c.ProfileError)
	}
}

// TestLabPortSearch: seed 000's fifth stage (a new FastCGI connection
// per request with tcp_tw_reuse 0): the profile shows nginx setting up
// connections and the kernel searching for a free local port, and the
// churn finding cites it. At 499 Hz: on 6.18 with a range of 50 000
// ports the search is about 0.5 % of nginx's samples over 5 s, a
// handful at 99 Hz.
func TestLabPortSearch(t *testing.T) {
	labNeeds(t)
	res := labRunCmd(t, "nginx-php-throughput", "--stage", "5", "--profile-hz", "499")
	c := res.before
	if c.Profile == nil {
		t.Fatalf("no profile (%s)\n%s", c.ProfileError, res.out)
	}
	var search, connect float64
	var funcs []string
	for _, s := range c.Profile.Servers {
		for _, a := range s.Activities {
			switch a.Kind {
			case cpuprof.PortSearch:
				search = max(search, a.Share)
				funcs = append(funcs, a.Funcs...)
			case cpuprof.TCPConnect:
				connect = max(connect, a.Share)
			}
		}
	}
	t.Logf("connection setup %.1f%%, port search %.1f%% of a server's samples (%s)", 100*connect, 100*search, strings.Join(funcs, ", "))
	if search == 0 || !slices.ContainsFunc(funcs, func(f string) bool { return strings.HasSuffix(f, "inet_hash_connect") }) {
		t.Errorf("the profile shows no port search: %+v", c.Profile.Servers)
	}
	f := findActive(res.before, "upstream-connection-churn")
	if f == nil || !itemHas(f, "set up outgoing connections") || !itemHas(f, "search for a free local port") {
		t.Errorf("churn does not cite the profile: %+v", f)
	}
}

func itemHas(f *report.Finding, s string) bool {
	for _, e := range f.Evidence {
		if strings.Contains(e.Text, s) {
			return true
		}
	}
	return false
}
