package load

import (
	"errors"
	"fmt"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Hist is an HDR latency histogram as a result's JSON carries it: the
// counts themselves, not percentiles, so that the histograms of several
// workers merge into exactly what one process would have recorded
// (percentiles of parts do not make the percentiles of the whole). Its
// geometry is the engine's (microseconds, 1 µs to an hour); Counts are
// the non-zero buckets as pairs, bucket index then count, in increasing
// index order: a run's few hundred filled buckets rather than the
// tens of thousands of the whole array.
type Hist struct {
	Unit    string  `json:"unit"`
	Lowest  int64   `json:"lowest"`
	Highest int64   `json:"highest"`
	Sig     int     `json:"significant_figures"`
	Total   int64   `json:"total"`
	Counts  []int64 `json:"counts"`
}

// histUnit is the unit of every histogram's values.
const histUnit = "us"

// newHist is h as a result carries it; nil for a nil histogram.
func newHist(h *hdrhistogram.Histogram) *Hist {
	if h == nil {
		return nil
	}
	s := h.Export()
	out := &Hist{Unit: histUnit, Lowest: s.LowestTrackableValue, Highest: s.HighestTrackableValue, Sig: int(s.SignificantFigures),
		Total: h.TotalCount(), Counts: []int64{}}
	for i, c := range s.Counts {
		if c != 0 {
			out.Counts = append(out.Counts, int64(i), c)
		}
	}
	return out
}

// errHist marks a histogram that is not one the engine records.
var errHist = errors.New("histogram")

// Histogram decodes x. It comes from a file another host wrote, so it
// is checked before anything is allocated for it: only the engine's
// own two geometries are read (bounded memory), every index must be in
// range and increasing, every count positive, and the counts must sum
// to the total.
func (x *Hist) Histogram() (*hdrhistogram.Histogram, error) {
	if x == nil {
		return nil, fmt.Errorf("%w: missing", errHist)
	}
	if x.Unit != histUnit || x.Lowest != histMin || x.Highest != histMax || (x.Sig != histSig && x.Sig != secSig) {
		return nil, fmt.Errorf("%w: unit %q, range %d..%d, %d digits: not netdoctor's (us, %d..%d, %d or %d)", errHist, x.Unit, x.Lowest, x.Highest, x.Sig, histMin, histMax, secSig, histSig)
	}
	if len(x.Counts)%2 != 0 {
		return nil, fmt.Errorf("%w: counts are not index/count pairs", errHist)
	}
	h := hdrhistogram.New(histMin, histMax, x.Sig)
	s := h.Export()
	var total int64
	last := int64(-1)
	for i := 0; i < len(x.Counts); i += 2 {
		idx, c := x.Counts[i], x.Counts[i+1]
		if idx <= last || idx >= int64(len(s.Counts)) || c <= 0 || c > (1<<62)-total {
			return nil, fmt.Errorf("%w: bucket %d (count %d) out of order, out of range or not positive", errHist, idx, c)
		}
		s.Counts[idx] = c
		total += c
		last = idx
	}
	if total != x.Total {
		return nil, fmt.Errorf("%w: counts sum to %d, total says %d", errHist, total, x.Total)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errHist, err)
	}
	return hdrhistogram.Import(s), nil
}
