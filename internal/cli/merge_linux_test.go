package cli

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// mergeLoad is the load of the distributed tests: open loop, so that
// one process and two send the same requests whatever the machine's
// speed, at a rate a loaded 2-core machine keeps.
const mergeLoad = "load -c 8 -t 1 -d 3s -R 1600"

// testMergeWorkers: two worker processes with --segment i/2 and one
// --start-at, against a server in a namespace, merge into the load one
// process sends: its percentiles are those of every request's latency
// the workers recorded (their raw latencies, within the histogram's
// precision), its rate one process's, the workers started together; and
// a worker held to 1 % of a CPU by a cgroup quota is named as the one
// whose share did not go out. Root: a namespace, a cgroup.
func testMergeWorkers(t *testing.T) {
	ns := testNetns(t)
	startHelper(t, ns, "serve", "ND_SERVER=plain", "ND_ADDR=127.0.0.2:7310")
	mergeWorkers(t, ns, "http://127.0.0.2:7310/", 0)

	// One worker held to 1 % of a CPU: its share does not go out, and
	// the merge says which.
	m := mergeWorkers(t, ns, "http://127.0.0.2:7310/", 1000)
	if !m.Saturated || !m.Workers[1].Saturated || m.Workers[0].Saturated || !slices.ContainsFunc(m.SaturatedBy, func(s string) bool {
		return strings.HasPrefix(s, "worker 2/2: ")
	}) {
		t.Errorf("worker 2/2 capped at 1%% of a CPU: merged saturated %v by %q, workers %+v; want worker 2/2 named", m.Saturated, m.SaturatedBy, m.Workers)
	}
}

// testMergeWorkersNginx: as testMergeWorkers, against Debian's nginx in
// a lab's server namespace, the workers in its client namespace.
func testMergeWorkersNginx(t *testing.T) {
	e := newLab(t)
	_, err := e.StartNginx(context.Background(), &lab.Nginx{})
	labMust(t, err)
	mergeWorkers(t, e.ClientNS.Name, "http://"+e.ServerIP+"/", 0)
}

// mergeWorkers runs mergeLoad in namespace ns against url, once in one
// process and once as two workers (the second under a CPU quota of
// quota µs per 100 ms, if not 0), merges the workers' results and
// checks the merge against the workers' raw latencies and, without a
// quota, against the single process. It returns the merged result.
func mergeWorkers(t *testing.T, ns, url string, quota int) *load.Result {
	t.Helper()
	dir := t.TempDir()

	workers := func(quota int) (*load.Result, []int64) {
		t.Helper()
		at := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		var cmds []*exec.Cmd
		var files []string
		var outs []*strings.Builder
		for i := 1; i <= 2; i++ {
			res, raw := filepath.Join(dir, fmt.Sprintf("w%d-%d.json", quota, i)), filepath.Join(dir, fmt.Sprintf("raw%d-%d", quota, i))
			cmd := loadIn(t, ns, strings.Fields(fmt.Sprintf("%s --segment %d/2 --start-at %s --json %s --debug-raw-latencies %s %s", mergeLoad, i, at, res, raw, url))...)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			if i == 2 && quota > 0 {
				cpuQuota(t, cmd.Process.Pid, quota)
			}
			cmds, files, outs = append(cmds, cmd), append(files, res, raw), append(outs, &out)
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("worker %d: %v\n%s", i+1, err, outs[i])
			}
		}
		merged := filepath.Join(dir, fmt.Sprintf("merged%d.json", quota))
		code, stdout, stderr := runCLI(t, "merge", "--json", merged, files[0], files[2])
		if code != ExitOK {
			t.Fatalf("merge: exit %d\n%s%s", code, stdout, stderr)
		}
		t.Logf("merge (quota %d):\n%s", quota, stdout)
		return readLoad(t, merged), append(rawLatencies(t, files[1]), rawLatencies(t, files[3])...)
	}

	m, raw := workers(quota)
	if quota > 0 {
		return m
	}
	if len(m.Workers) != 2 || m.Requests != uint64(len(raw)) || m.Saturated {
		t.Fatalf("merged %d workers, %d requests, %d raw latencies, saturated %v by %q", len(m.Workers), m.Requests, len(raw), m.Saturated, m.SaturatedBy)
	}
	slices.Sort(raw)
	for _, p := range m.Percentiles {
		// The histogram's value at p is the top of the bucket holding
		// the request of rank p n rounded (HDR's rule): within its 3
		// digits of that request's latency.
		want := raw[max(0, int(p.Percentile/100*float64(len(raw))+0.5)-1)]
		got := int64(p.Latency / time.Microsecond)
		if got < want || float64(got-want) > 0.001*float64(want)+1 {
			t.Errorf("merged p%v = %d µs; the workers' raw latencies say %d µs", p.Percentile, got, want)
		}
	}
	single := filepath.Join(dir, "single.json")
	if out, err := loadIn(t, ns, strings.Fields(mergeLoad+" --json "+single+" "+url)...).CombinedOutput(); err != nil {
		t.Fatalf("single load: %v\n%s", err, out)
	}
	one := readLoad(t, single)
	if d := math.Abs(m.RPS-one.RPS) / one.RPS; d > 0.05 {
		t.Errorf("merged %.0f req/s, one process %.0f: more than 5%% apart", m.RPS, one.RPS)
	}
	if skew := m.Workers[1].Start.Sub(m.Workers[0].Start).Abs(); skew > 50*time.Millisecond {
		t.Errorf("workers started %v apart, want together", skew)
	}
	if len(m.Timeline) < 3 || len(m.Timeline) > 4 {
		t.Errorf("merged timeline of %d seconds for a 3 s load", len(m.Timeline))
	}
	// The workers' seconds, summed by wall clock, hold every response,
	// and their percentiles come from the seconds' histograms.
	var inSeconds uint64
	for _, s := range m.Timeline {
		inSeconds += s.Requests
		if s.Requests > 0 && (s.P50 == 0 || s.P99 < s.P50) {
			t.Errorf("merged second %d: p50 %v, p99 %v", s.Index, s.P50, s.P99)
		}
	}
	if inSeconds != m.Requests {
		t.Errorf("the merged seconds hold %d responses, the result %d", inSeconds, m.Requests)
	}
	return m
}

// loadIn is netdoctor ARGS in namespace ns (this test binary as
// netdoctor), killed if it runs past a bound when the test ends.
func loadIn(t *testing.T, ns string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, os.Args[0]}, args...)...)
	cmd.Env = append(os.Environ(), "ND_HELPER=cli")
	return cmd
}

// cpuQuota moves pid into a cgroup v1 cpu group of its own allowed
// quota µs of CPU per 100 ms, removed when the test ends.
func cpuQuota(t *testing.T, pid, quota int) {
	t.Helper()
	dir := fmt.Sprintf("/sys/fs/cgroup/cpu/ndtest-%d-%d", os.Getpid(), pid)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no cgroup v1 cpu controller to cap a worker: %v", err)
	}
	t.Cleanup(func() {
		// The worker is killed and reaped by its own cleanup, which ran
		// before this one (cleanups run last first).
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	for _, w := range []struct{ file, value string }{{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", strconv.Itoa(quota)}, {"cgroup.procs", strconv.Itoa(pid)}} {
		if err := os.WriteFile(filepath.Join(dir, w.file), []byte(w.value), 0); err != nil {
			t.Fatalf("%s: %v", w.file, err)
		}
	}
}

func readLoad(t *testing.T, path string) *load.Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := report.Read(f)
	if err != nil || r.Load == nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r.Load
}

func rawLatencies(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []int64
	s := bufio.NewScanner(f)
	for s.Scan() {
		v, err := strconv.ParseInt(s.Text(), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	return out
}

// testMergeRunWorkers: run --segment i/2 --start-at, two runs in one
// namespace against its server: each samples through a baseline that
// ends at the common start, their loads start together, and merge reads
// their reports' loads as one load's. Root: a namespace.
func testMergeRunWorkers(t *testing.T) {
	ns := testNetns(t)
	startHelper(t, ns, "serve", "ND_SERVER=plain", "ND_ADDR=127.0.0.2:7311")
	url := "http://127.0.0.2:7311/"
	dir := t.TempDir()
	at := time.Now().Add(4 * time.Second).UTC().Format(time.RFC3339Nano)
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	var files []string
	for i := 1; i <= 2; i++ {
		f := filepath.Join(dir, fmt.Sprintf("run%d.json", i))
		cmd := loadIn(t, ns, strings.Fields(fmt.Sprintf("run -c 8 -t 1 -d 3s -R 1600 --tail 1s --profile-hz 0 --segment %d/2 --start-at %s --json %s %s", i, at, f, url))...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		cmds, outs, files = append(cmds, cmd), append(outs, &out), append(files, f)
	}
	for i, c := range cmds {
		// A run's exit says its findings (1): the report is what counts.
		if err := c.Wait(); err != nil && c.ProcessState.ExitCode() != ExitFindings {
			t.Fatalf("run worker %d: %v\n%s", i+1, err, outs[i])
		}
	}
	code, stdout, stderr := runCLI(t, "merge", "--json", filepath.Join(dir, "merged.json"), files[0], files[1])
	if code != ExitOK {
		t.Fatalf("merge of the runs: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("merge of two run workers:\n%s", stdout)
	m := readLoad(t, filepath.Join(dir, "merged.json"))
	start, _ := time.Parse(time.RFC3339Nano, at)
	if len(m.Workers) != 2 || m.Rate != 1600 || m.RPS < 0.9*1600 {
		t.Errorf("merged %d workers at %v req/s asked, %.0f sent", len(m.Workers), m.Rate, m.RPS)
	}
	for _, w := range m.Workers {
		if d := w.Start.Sub(start); d < 0 || d > 50*time.Millisecond {
			t.Errorf("worker %s's load started %v after the common start, want within milliseconds", w.Segment, d)
		}
	}
}
