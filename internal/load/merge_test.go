package load

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// TestSegmentShare: every worker's share of the connections, of -n and
// of the open-loop rate sums exactly to the whole, and no worker is
// left without a connection.
func TestSegmentShare(t *testing.T) {
	o := Options{Connections: 103, Requests: 1001, Rate: 12345.678, Threads: 4, Ramp: &Ramp{From: 10, To: 103, Over: time.Second}}
	for _, n := range []int{1, 2, 3, 7, 10} {
		var conns, from, reqs, milli int64
		for i := 1; i <= n; i++ {
			s, err := ParseSegment(strconv.Itoa(i)+"/"+strconv.Itoa(n), 1)
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.Share(o)
			if err != nil {
				t.Fatal(err)
			}
			if w.Connections < 1 || w.Connections > o.Connections/n+1 || w.Ramp.To != w.Connections {
				t.Errorf("%d/%d: %d connections (ramp to %d), want about %d", i, n, w.Connections, w.Ramp.To, o.Connections/n)
			}
			conns += int64(w.Connections)
			from += int64(w.Ramp.From)
			reqs += w.Requests
			milli += int64(w.Rate*rateUnit + 0.5)
		}
		if conns != 103 || from != 10 || reqs != 1001 || milli != 12345678 {
			t.Errorf("N=%d: shares sum to %d connections, ramp from %d, %d requests, %d m req/s; want 103, 10, 1001, 12345678", n, conns, from, reqs, milli)
		}
	}
	s, _ := ParseSegment("3/4", 1)
	if _, err := s.Share(Options{Connections: 3}); !errors.Is(err, ErrInvalid) {
		t.Errorf("3 connections among 4 workers: %v, want ErrInvalid", err)
	}
	if s, err := ParseSegment("0/4", 0); err != nil || s != (Segment{1, 4}) {
		t.Errorf("0/4 counted from 0: %v %v, want 1/4", s, err)
	}
	for _, bad := range []string{"0/4", "5/4", "1/0", "x/2", "2", "1/2/3", "-1/2", "1/100000"} {
		if _, err := ParseSegment(bad, 1); err == nil {
			t.Errorf("ParseSegment(%q) accepted", bad)
		}
	}
}

func TestCheckStartAt(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {-900 * time.Millisecond, true}, {-1100 * time.Millisecond, false}, {59 * time.Minute, true}, {61 * time.Minute, false}} {
		if err := CheckStartAt(now.Add(c.d), now); (err == nil) != c.ok {
			t.Errorf("start %v from now: %v, want ok %v", c.d, err, c.ok)
		}
	}
}

// workerResult makes a worker's result from latencies (µs) recorded from
// start, as the engine writes it with --json.
func workerResult(seg Segment, start time.Time, rate float64, lat []int64) *Result {
	run := hdrhistogram.New(histMin, histMax, histSig)
	var tl []Second
	per := len(lat)/3 + 1
	for i := 0; i*per < len(lat); i++ {
		h := hdrhistogram.New(histMin, histMax, secSig)
		part := lat[i*per : min(len(lat), (i+1)*per)]
		for _, v := range part {
			h.RecordValue(v)
			run.RecordValue(v)
		}
		tl = append(tl, Second{Index: i, Start: start.Add(time.Duration(i) * time.Second), Length: time.Second, Requests: uint64(len(part)), Histogram: newHist(h)})
	}
	r := &Result{URL: "http://10.0.0.2/", Method: "GET", KeepAlive: true, Connections: 5, Threads: 1, Rate: rate,
		Start: start, Elapsed: 3 * time.Second, DurationS: 3, Requests: uint64(len(lat)), RPS: float64(len(lat)) / 3,
		Status: map[string]uint64{"2xx": uint64(len(lat))}, Timeline: tl, Segment: &seg, hist: run, histAll: run}
	r.KeepHistograms()
	return r
}

// roundTrip is r written as JSON and read back, as merge reads a file.
func roundTrip(t *testing.T, r *Result) *Result {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var out Result
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// TestMerge: the merged percentiles are those of every worker's
// latencies together (within the histogram's precision), the counts
// and the seconds sum by wall clock, and a worker whose share of the
// rate did not go out is named.
func TestMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	var union []int64
	var rs []*Result
	for i, n := range []int{3000, 3000, 900} {
		lat := make([]int64, n)
		for j := range lat {
			lat[j] = 100 + int64(rng.ExpFloat64()*float64(500*(i+1)))
		}
		union = append(union, lat...)
		rs = append(rs, roundTrip(t, workerResult(Segment{i + 1, 3}, t0.Add(time.Duration(i)*3*time.Millisecond), 1000, lat)))
	}
	slices.Reverse(rs) // any order
	m, err := Merge(rs)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(union)
	for _, p := range m.Percentiles {
		if p.Percentile == 100 {
			continue
		}
		want := union[max(0, int(float64(len(union))*p.Percentile/100+0.5)-1)]
		got := int64(p.Latency / time.Microsecond)
		if d := float64(got-want) / float64(want); d < -0.002 || d > 0.002 {
			t.Errorf("p%v = %d µs, the union's %d µs", p.Percentile, got, want)
		}
	}
	if m.Requests != 6900 || m.Connections != 15 || m.Rate != 3000 || len(m.Timeline) != 3 || m.Timeline[0].Requests != 1001+1001+301 {
		t.Errorf("requests %d, connections %d, rate %v, timeline %+v", m.Requests, m.Connections, m.Rate, m.Timeline)
	}
	if m.Elapsed != 3*time.Second+6*time.Millisecond {
		t.Errorf("elapsed %v, want from the first start to the last end", m.Elapsed)
	}
	if !m.Saturated || len(m.SaturatedBy) != 1 || !strings.HasPrefix(m.SaturatedBy[0], "worker 3/3: sent 30%") || !m.Workers[2].Saturated || m.Workers[0].Saturated {
		t.Errorf("saturated %v by %q; want worker 3/3 named (30%% of its share sent)", m.Saturated, m.SaturatedBy)
	}
	// A merged result merges no further, but reads back whole.
	back := roundTrip(t, m)
	if back.Histogram == nil || back.Histogram.Total != 6900 || len(back.Workers) != 3 {
		t.Errorf("merged result read back: histogram %+v, %d workers", back.Histogram, len(back.Workers))
	}
}

func TestMergeRefuses(t *testing.T) {
	t0 := time.Now()
	w := func(i, n int) *Result { return workerResult(Segment{i, n}, t0, 0, []int64{100, 200}) }
	other := w(2, 2)
	other.URL = "http://10.0.0.3/"
	noHist := w(2, 2)
	noHist.Histogram = nil
	badHist := w(2, 2)
	badHist.Histogram.Counts = append(badHist.Histogram.Counts, 1<<40, 1)
	for name, c := range map[string]struct {
		rs   []*Result
		want string
	}{
		"missing":    {[]*Result{w(1, 3), w(3, 3)}, "missing segment [2] of 3"},
		"twice":      {[]*Result{w(1, 2), w(1, 2)}, "worker 1/2 given twice"},
		"other N":    {[]*Result{w(1, 2), w(2, 3)}, "is one of 2"},
		"other URL":  {[]*Result{w(1, 2), other}, "loaded GET"},
		"no segment": {[]*Result{{URL: "x"}}, "no segment"},
		"no hist":    {[]*Result{w(1, 2), noHist}, "no latency histogram"},
		"bad hist":   {[]*Result{w(1, 2), badHist}, "histogram"},
		"none":       {nil, "no results"},
	} {
		_, err := Merge(c.rs)
		if !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line saying %q", name, err, c.want)
		}
	}
}

// FuzzHist: a histogram read from another host's file is decoded
// without a panic or an allocation it names, and what decodes is
// written back the same.
func FuzzHist(f *testing.F) {
	h := hdrhistogram.New(histMin, histMax, histSig)
	for _, v := range []int64{1, 5, 100, 1000, 123456, histMax} {
		h.RecordValue(v)
	}
	b, _ := json.Marshal(newHist(h))
	f.Add(b)
	f.Add([]byte(`{"unit":"us","lowest":1,"highest":3600000000,"significant_figures":2,"total":1,"counts":[5,1]}`))
	f.Add([]byte(`{"unit":"us","lowest":1,"highest":3600000000,"significant_figures":3,"total":0,"counts":[99999999,1]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var x Hist
		if json.Unmarshal(in, &x) != nil {
			return
		}
		got, err := x.Histogram()
		if err != nil {
			return
		}
		again := newHist(got)
		if again.Total != x.Total || !slices.Equal(again.Counts, x.Counts) {
			t.Errorf("decoded %+v, written back %+v", x, again)
		}
	})
}

// TestMergeMeasured: the workers' measured parts (a capacity step after
// its warm-up) merge as the whole does: counts summed, every request's
// percentiles from the merged histograms; a worker without one leaves
// the merge without one.
func TestMergeMeasured(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	var union []int64
	var rs []*Result
	for i := range 2 {
		lat := make([]int64, 500)
		for j := range lat {
			lat[j] = int64(100 + j*(i+1)*7)
		}
		union = append(union, lat...)
		r := workerResult(Segment{i + 1, 2}, t0, 100, lat)
		all := hdrhistogram.New(histMin, histMax, histSig)
		for _, v := range lat {
			all.RecordValue(v)
		}
		r.Measured = &Window{From: time.Second, Seconds: 2 + float64(i)/10, Requests: uint64(len(lat)), Unsent: uint64(i),
			Status: map[string]uint64{"2xx": uint64(len(lat))}, all: all}
		r.KeepHistograms()
		rs = append(rs, roundTrip(t, r))
	}
	m, err := Merge(rs)
	if err != nil {
		t.Fatal(err)
	}
	w := m.Measured
	if w == nil || w.Requests != 1000 || w.Unsent != 1 || w.Good() != 1000 || w.Seconds != 2.1 || w.From != time.Second {
		t.Fatalf("merged measured part %+v: want 1000 requests, 1 unsent, over 2.1 s from 1 s", w)
	}
	slices.Sort(union)
	for _, p := range []float64{50, 90, 99, 100} {
		want := union[int(math.Ceil(p/100*float64(len(union))))-1]
		got := w.Percentile(p).Microseconds()
		if math.Abs(float64(got-want)) > float64(want)/1000+1 {
			t.Errorf("p%g: %d µs, want %d µs (every request's, within 3 digits)", p, got, want)
		}
	}
	rs[1].Measured = nil
	if m, err := Merge(rs); err != nil || m.Measured != nil {
		t.Errorf("a worker without a measured part: %v, %+v; want no merged one", err, m.Measured)
	}
}
