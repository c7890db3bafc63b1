package report_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestWrkText: the numbers of a real wrk 4.1 run (wrk -t2 -c10 -d2s
// --latency against a local server) come out as wrk printed them, to
// the byte, and netdoctor's own lines follow.
func TestWrkText(t *testing.T) {
	r := &load.Result{
		Threads: 2, Connections: 10, KeepAlive: true, ConnectionsOpened: 10,
		Requests: 203804, Elapsed: 2100 * time.Millisecond,
		Bytes: 26288000, RPS: 97043.52, BytesPerSec: 12520000,
		LatencySpread: load.Spread{Samples: 203804, Mean: 366.8, Stdev: 818.83, Max: 8250, WithinStdev: 90.14},
		ReqPerSec:     load.Spread{Samples: 40, Mean: 48790, Stdev: 4210, Max: 56040, WithinStdev: 69.05},
		Percentiles: []load.Percentile{{Percentile: 50, Latency: 81 * time.Microsecond}, {Percentile: 75, Latency: 140 * time.Microsecond},
			{Percentile: 90, Latency: 1160 * time.Microsecond}, {Percentile: 99, Latency: 3890 * time.Microsecond},
			{Percentile: 99.9, Latency: 5 * time.Millisecond}, {Percentile: 100, Latency: 8250 * time.Microsecond}},
		Status: map[string]uint64{"2xx": 203804},
		Self:   load.Self{CPUPerRequest: 4200 * time.Nanosecond, ThreadBusy: []float64{0.5, 0.99}},
	}
	var b bytes.Buffer
	if err := report.WrkHeader(&b, report.WrkDuration(2*time.Second), "http://127.0.0.1:18089/", 2, 10); err != nil {
		t.Fatal(err)
	}
	if err := report.WrkText(&b, r, true); err != nil {
		t.Fatal(err)
	}
	wrk := `Running 2s test @ http://127.0.0.1:18089/
  2 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   366.80us  818.83us   8.25ms   90.14%
    Req/Sec    48.79k     4.21k   56.04k    69.05%
  Latency Distribution
     50%   81.00us
     75%  140.00us
     90%    1.16ms
     99%    3.89ms
  203804 requests in 2.10s, 25.07MB read
Requests/sec:  97043.52
Transfer/sec:     11.94MB
`
	got := b.String()
	if !strings.HasPrefix(got, wrk) {
		t.Errorf("not wrk's layout (-wrk +netdoctor):\n%s", cmp.Diff(wrk, got[:min(len(got), len(wrk))]))
	}
	own := got[min(len(got), len(wrk)):]
	for _, want := range []string{"Percentiles: p50 81.00us, p75 140.00us, p90 1.16ms, p99 3.89ms, p99.9 5.00ms, max 8.25ms\n",
		"Status: 2xx 203804\n", "Connections: keep-alive, 10 opened\n", "each thread was on CPU: 0.50 0.99\n"} {
		if !strings.Contains(own, want) {
			t.Errorf("netdoctor's lines lack %q:\n%s", want, own)
		}
	}
	// None of netdoctor's lines looks like one of wrk's to a script.
	for _, word := range []string{"Latency", "Req/Sec", "requests in", "Requests/sec", "Transfer/sec", "50%", "75%", "90%", "99%"} {
		if strings.Contains(own, word) {
			t.Errorf("netdoctor's lines contain wrk's %q:\n%s", word, own)
		}
	}
}

// TestWrkUnits: wrk's units and column widths at their edges.
func TestWrkUnits(t *testing.T) {
	r := &load.Result{
		Requests: 5, Elapsed: 90 * time.Second, Bytes: 800, RPS: 849, BytesPerSec: 871,
		LatencySpread: load.Spread{Mean: 849, Stdev: 850, Max: 1.5e6, WithinStdev: 100},
		ReqPerSec:     load.Spread{Mean: 849, Stdev: 850, Max: 1.2e6},
		Status:        map[string]uint64{"2xx": 3, "5xx": 2},
		Errors:        load.Errors{Read: 4},
		ErrorCauses:   map[string]uint64{"reset": 4},
	}
	var b bytes.Buffer
	if err := report.WrkText(&b, r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"    Latency   849.00us    0.85ms   1.50s   100.00%\n",
		"    Req/Sec   849.00      0.85k    1.20M     0.00%\n",
		"  5 requests in 1.50m, 800.00B read\n",
		"  Socket errors: connect 0, read 4, write 0, timeout 0\n",
		"  Non-2xx or 3xx responses: 2\n",
		"Requests/sec:    849.00\n",
		"Transfer/sec:      0.85KB\n",
		"Errors by cause: reset 4\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
	for d, want := range map[time.Duration]string{10 * time.Second: "10s", 2 * time.Minute: "2m", time.Hour: "1h",
		90 * time.Second: "1m30s", 500 * time.Millisecond: "500ms", 55 * time.Second: "55s"} {
		if got := report.WrkDuration(d); got != want {
			t.Errorf("WrkDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
