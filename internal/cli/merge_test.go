package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// workerJSON is a worker's load --json result as merge reads it: rps
// req/s of lat µs (each below 2048, which is its own bucket's index at
// 3 digits) for 2 s from start.
func workerJSON(seg, start, url string, n int, lat int) string {
	return fmt.Sprintf(`{"version":2,"command":"load","findings":[],"url":%q,"method":"GET","keepalive":true,"connections":2,"threads":1,
		"requests":%d,"rps":%d,"duration_ns":2000000000,"duration_s":2,"status_classes":{"2xx":%d},"start":%q,"segment":{"index":%s,"count":2},
		"latency":{"p50_ns":%d000},
		"histogram":{"unit":"us","lowest":1,"highest":3600000000,"significant_figures":3,"total":%d,"counts":[%d,%d]},
		"timeline":[{"second":0,"start":%q,"length_ns":1000000000,"requests":%d,"histogram":{"unit":"us","lowest":1,"highest":3600000000,"significant_figures":2,"total":%d,"counts":[%d,%d]}}]}`,
		url, n, n/2, n, start, seg, lat, n, lat, n, start, n, n, lat, n)
}

// TestMergeCommand: merge reads the workers' results from files, or
// from one file of them one after the other (kubectl logs of the
// pods), writes one load report that compare reads; results that are
// not one load's are refused in one line, exit 2.
func TestMergeCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const url = "http://10.0.0.2/"
	w1 := write("w1.json", workerJSON("1", "2026-11-28T17:00:00.000Z", url, 100, 500))
	w2 := write("w2.json", workerJSON("2", "2026-11-28T17:00:00.002Z", url, 300, 1500))
	logs := write("logs.json", workerJSON("2", "2026-11-28T17:00:00.002Z", url, 300, 1500)+"\n"+workerJSON("1", "2026-11-28T17:00:00.000Z", url, 100, 500))
	merged := filepath.Join(dir, "merged.json")
	code, stdout, stderr := runCLI(t, "merge", "--json", merged, w1, w2)
	if code != ExitOK {
		t.Fatalf("merge: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"400 requests in 2.00s", "Percentiles: p50 1.50ms", "Workers: 2, started within 2.00ms of each other", "  1/2  ", "  2/2  "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("merge's text lacks %q:\n%s", want, stdout)
		}
	}
	code, fromLogs, stderr := runCLI(t, "merge", logs)
	if code != ExitOK || fromLogs != stdout {
		t.Errorf("merge of kubectl logs' concatenated results: exit %d %s\n%s\nwant\n%s", code, stderr, fromLogs, stdout)
	}
	code, stdout, stderr = runCLI(t, "compare", w1, merged)
	if code != ExitOK || !strings.Contains(stdout, "requests/s, answered        50     200") {
		t.Errorf("compare with a merged report: exit %d %s\n%s", code, stderr, stdout)
	}

	failed := write("failed.json", workerJSON("1", "2026-11-28T17:00:00.000Z", url, 100, 500)+"\nnetdoctor: --start-at: start time 2026-11-28T17:00:00Z is 3s in the past\n")
	code, _, stderr = runCLI(t, "merge", failed)
	if code != ExitUsage || !strings.Contains(stderr, `document 2 is not a result: "netdoctor: --start-at: start time`) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("merge of a failed pod's log: exit %d, %q; want its line quoted", code, stderr)
	}
	other := write("other.json", workerJSON("2", "2026-11-28T17:00:00.002Z", "http://10.0.0.3/", 300, 1500))
	three := write("three.json", strings.Replace(workerJSON("2", "2026-11-28T17:00:00.002Z", url, 300, 1500), `"count":2`, `"count":3`, 1))
	run := write("run.json", `{"version":2,"command":"run","findings":[]}`)
	for _, args := range [][]string{{"merge"}, {"merge", w1}, {"merge", w1, w1}, {"merge", w1, other}, {"merge", w1, three},
		{"merge", w1, run}, {"merge", w1, write("garbage", "nope")}, {"merge", w1, filepath.Join(dir, "none.json")}} {
		if code, _, stderr := runCLI(t, args...); code != ExitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one line and exit 2", args[1:], code, stderr)
		}
	}
}
