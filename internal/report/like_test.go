package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// seed000Like is make demo's verify as it once read: before the fix,
// few requests answered, fast, and 389 timed out at 2 s; after, every
// one answered in about 20 ms.
func seed000Like() (before, after *load.Result) {
	before = &load.Result{Requests: 120, DurationS: 5, RPS: 24, Status: map[string]uint64{"2xx": 111, "5xx": 9},
		Errors: load.Errors{Timeout: 389}, Latency: load.Latency{P50: 906 * time.Microsecond, P99: 6800 * time.Microsecond, Max: 9 * time.Millisecond},
		LatencyAll: &load.Latency{P50: 2 * time.Second, P99: 2100 * time.Millisecond, Max: 2200 * time.Millisecond}}
	after = &load.Result{Requests: 50000, DurationS: 5, RPS: 10000, Status: map[string]uint64{"2xx": 50000},
		Latency:    load.Latency{P50: 21700 * time.Microsecond, P99: 156 * time.Millisecond, Max: 300 * time.Millisecond},
		LatencyAll: &load.Latency{P50: 21700 * time.Microsecond, P99: 156 * time.Millisecond, Max: 300 * time.Millisecond}}
	return before, after
}

// TestLikeWithLike: a fix that turned timeouts into answers reads as
// faster: goodput and success up, every request's latency down, where
// the answered requests' alone would read slower.
func TestLikeWithLike(t *testing.T) {
	b, a := seed000Like()
	rows := LikeWithLike(b, a)
	want := []LikeRow{
		{"goodput (2xx/3xx per s)", "22", "10000", "×450.45"},
		{"success share", "21.8 %", "100 %", "+78.2 pts"},
		{"latency p50, every request", "2.00s", "21.70ms", "×0.01"},
		{"latency p99, every request", "2.10s", "156.00ms", "×0.07"},
		{"latency max, every request", "2.20s", "300.00ms", "×0.14"},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v", rows)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, rows[i], want[i])
		}
	}
	// A report written before every request's latency: both sides the
	// answered requests', and said so.
	old := *b
	old.LatencyAll = nil
	if r := LikeWithLike(&old, a); r[2].Name != "latency p50, answered only" || r[2].Before != "906.00us" || r[2].After != "21.70ms" {
		t.Errorf("without latency_all: %+v", r[2])
	}
	var w bytes.Buffer
	if err := VerifyText(&w, &Run{Report: &Report{}, Load: b}, &Run{Report: &Report{}, Load: a}, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"goodput (2xx/3xx per s)     22", "→ 10000", "latency p50, every request  2.00s", "→ 21.70ms", "requests/s, answered"} {
		if !strings.Contains(w.String(), s) {
			t.Errorf("verify text lacks %q:\n%s", s, w.String())
		}
	}
	if line := EveryRequest(b); !strings.Contains(line, "p50 2.00s") || !strings.Contains(line, "success 21.8 %") || EveryRequest(a) != "" {
		t.Errorf("every request: %q, %q", line, EveryRequest(a))
	}
}

func TestPercent(t *testing.T) {
	for v, want := range map[float64]string{1: "100 %", 0.99996: "99.99 %", 0.999: "99.90 %", 0.5: "50.0 %", 0.2186: "21.8 %", 0: "0.0 %"} {
		if got := Percent(v); got != want {
			t.Errorf("Percent(%v) = %q, want %q", v, got, want)
		}
	}
}
