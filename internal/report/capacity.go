package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// Capacity is the report of `netdoctor capacity` (docs/capacity.md): the
// highest request rate that met the SLO, the steps that found it, what
// limited it there and how far the other resources were from theirs.
type Capacity struct {
	Version int    `json:"version"`
	Command string `json:"command"`
	URL     string `json:"url"`
	Verdict string `json:"verdict"`
	SLO     SLO    `json:"slo"`
	// CapacityRPS is the highest offered rate, in requests a second,
	// that met the SLO every time it ran; 0 when none did.
	CapacityRPS float64 `json:"capacity_rps"`
	// Bracket is the capacity's uncertainty: the last rate that met the
	// SLO and the first above it that broke it.
	Bracket Bracket `json:"bracket"`
	// Noise is how much the same rate's figures moved from one run to
	// the next, when a rate ran twice.
	Noise *Noise `json:"noise,omitempty"`
	// Steps are every load the search ran, in order.
	Steps []Step `json:"steps"`
	// LimitedBy is what limited the capacity, from the diagnosis of a
	// step that broke the SLO: its findings that explain the break
	// (basis "finding"), else the resources found at their limit
	// (basis "headroom"), or the load generator itself (basis
	// "load-generator": the service's capacity is then at least the
	// figure, and nothing of the server's is blamed).
	LimitedBy []Limit `json:"limited_by"`
	// Headroom is how far each resource was from its limit in that
	// step, fullest first.
	Headroom []Headroom `json:"headroom"`
	// GeneratorLimited: the load generator, not the service, limited
	// the search (load-generator-saturated).
	GeneratorLimited bool `json:"load_generator_limited"`
	// Stopped says why the search ended.
	Stopped     string        `json:"stopped"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	MaxDuration time.Duration `json:"max_duration_ns"`
	// Diagnosis is the run report of the step that was diagnosed.
	Diagnosis *Run     `json:"diagnosis,omitempty"`
	Notes     []string `json:"notes,omitempty"`
}

// SLO is what a step must meet: each objective's percentile of the
// latency of every request (failed ones at the time they failed or
// timed out) within its bound, and at most MaxErrorShare of the
// requests failed (errors, non-2xx/3xx responses, requests never sent).
type SLO struct {
	Objectives    []Objective `json:"objectives"`
	MaxErrorShare float64     `json:"max_error_share"`
	Text          string      `json:"text"`
}

// Objective is one latency objective: percentile ≤ bound.
type Objective struct {
	Percentile float64       `json:"percentile"`
	Bound      time.Duration `json:"bound_ns"`
}

// Name is the objective's percentile as the SLO writes it: "p99",
// "p99.9".
func (o Objective) Name() string {
	return "p" + strconv.FormatFloat(o.Percentile, 'f', -1, 64)
}

func (o Objective) String() string { return o.Name() + "<=" + shortDur(o.Bound) }

// Bracket is the capacity's bracket: Pass met the SLO, Fail broke it;
// 0 when no such rate ran.
type Bracket struct {
	Pass float64 `json:"pass_rps"`
	Fail float64 `json:"fail_rps"`
}

// Noise is the run-to-run spread at one rate that ran more than once:
// the limiting objective's percentile and the goodput of each run, and
// their spread (the largest relative difference between two runs).
type Noise struct {
	Rate      float64         `json:"rate"`
	Objective string          `json:"objective"`
	Latency   []time.Duration `json:"latency_ns"`
	Goodput   []float64       `json:"goodput_rps"`
	Spread    float64         `json:"spread"`
}

// Step is one load of the search.
type Step struct {
	N int `json:"n"`
	// Phase: "probe" (a short closed loop that finds where to start),
	// "search", "repeat" (a rate run again, for the noise) or
	// "diagnosis" (the step run again with both sides sampled).
	Phase string `json:"phase"`
	// Rate is the offered rate, requests a second (0 for the probe).
	Rate float64 `json:"rate"`
	// Connections is the most the load could open; Opened how many it
	// did.
	Connections int       `json:"connections"`
	Opened      uint64    `json:"connections_opened"`
	Start       time.Time `json:"start"`
	// Warmup was discarded; Seconds were measured after it.
	Warmup  time.Duration `json:"warmup_ns"`
	Seconds float64       `json:"seconds"`
	// Goodput is successful responses (2xx/3xx) a second; Throughput
	// every request that ended a second (answered or failed).
	Goodput      float64 `json:"goodput_rps"`
	Throughput   float64 `json:"throughput_rps"`
	SuccessShare float64 `json:"success_share"`
	// Errors are failed requests: connect, read, write, timeout, and
	// non-2xx/3xx responses; Unsent, those never sent (every connection
	// busy); Queued, those that waited in the generator for one.
	Errors uint64 `json:"errors"`
	Unsent uint64 `json:"unsent,omitempty"`
	Queued uint64 `json:"queued,omitempty"`
	// Latency is every request's: p50, p90, p99, p99.9, the SLO's, max.
	Latency []Quantile `json:"latency"`
	// Pass: the step met the SLO; Broke says what broke it.
	Pass  bool     `json:"pass"`
	Broke []string `json:"broke,omitempty"`
	// Collapsed: stopped early, the service failing most requests.
	Collapsed bool `json:"collapsed,omitempty"`
	// GeneratorLimited says why the load generator may have limited
	// the step (load.Result.SaturatedBy).
	GeneratorLimited []string `json:"load_generator_limited,omitempty"`
}

// Quantile is one percentile of a step's latency.
type Quantile struct {
	Percentile float64       `json:"percentile"`
	Latency    time.Duration `json:"latency_ns"`
}

// At is the step's latency at percentile p, and whether it has it.
func (s Step) At(p float64) (time.Duration, bool) {
	for _, q := range s.Latency {
		if q.Percentile == p {
			return q.Latency, true
		}
	}
	return 0, false
}

// Limit is what limited the capacity: a finding of the diagnosis, or a
// resource at its limit that no finding named (Basis).
type Limit struct {
	Finding
	// Basis: "finding", "headroom", "queued", "fullest" or
	// "load-generator".
	Basis string `json:"basis"`
}

// Bases of a Limit.
const (
	BasisFinding   = "finding"
	BasisHeadroom  = "headroom"
	BasisGenerator = "load-generator"
	// BasisFullest: the diagnosed step met the SLO (the knee moves from
	// run to run), so nothing was seen at its limit; the resource
	// fullest there is the likely limit.
	BasisFullest = "fullest"
	// BasisQueued: nothing was at its limit, but many connections
	// waited in a listener's accept queue: its server took them slower
	// than they came.
	BasisQueued = "queued"
)

// Headroom is one resource's use against its limit in the diagnosed
// step: Share is Used / Limit at the step's peak, 1 at the limit.
type Headroom struct {
	// Resource: "worker-pool", "dependency-pool", "accept-queue", "cpu",
	// "conntrack", "ports", "bandwidth", "fds".
	Resource string  `json:"resource"`
	Subject  string  `json:"subject"`
	Side     Side    `json:"side,omitempty"`
	Used     float64 `json:"used"`
	Limit    float64 `json:"limit"`
	Unit     string  `json:"unit"`
	Share    float64 `json:"share"`
	// Finding is the finding that reports this resource at its limit;
	// Active, that the diagnosis made it.
	Finding FindingID `json:"finding"`
	Active  bool      `json:"active,omitempty"`
	// Queued says requests waited unread for the resource while it was
	// at its limit: it was full, as a pool is, whatever its finding.
	Queued bool   `json:"queued,omitempty"`
	Text   string `json:"text"`
}

// CapacityVerify is the JSON of `capacity --verify-with`: the search
// before and after the plan was applied (and rolled back).
type CapacityVerify struct {
	Version int       `json:"version"`
	Command string    `json:"command"`
	Plan    string    `json:"plan"`
	Before  *Capacity `json:"before"`
	After   *Capacity `json:"after"`
	// Change is after's capacity over before's; 0 when before's is 0.
	Change float64 `json:"change"`
}

// CapacityText writes a capacity report for a person: the verdict, what
// limited it, the steps as a rate-vs-latency table, the headroom.
func CapacityText(w io.Writer, c *Capacity) error {
	w = printable.NewWriter(w)
	p := NewPrinter(w)
	p.F("netdoctor capacity: %s\n", c.URL)
	p.F("SLO: %s (latency of every request from its intended send time, failed ones at the time they failed)\n\n", c.SLO.Text)
	p.F("%s\n", c.Verdict)
	if c.Noise != nil {
		p.F("Run to run at %s req/s: %s %s, goodput %s (spread %.0f %%)\n", rate(c.Noise.Rate), c.Noise.Objective, durs(c.Noise.Latency), rates(c.Noise.Goodput), 100*c.Noise.Spread)
	}
	if len(c.LimitedBy) > 0 {
		p.F("\nLimited by:\n")
		for _, l := range c.LimitedBy {
			p.F("  %s (%s", l.Title, l.ID)
			if l.Subject != "" {
				p.F(", %s", l.Subject)
			}
			p.F("; %s)\n", basisText(l.Basis))
			for _, it := range l.Shown() {
				p.F("    - %s\n", it.Text)
			}
			for _, fx := range l.Fix {
				p.F("    fix: %s\n", fx)
			}
		}
	}
	p.F("\nSteps (open loop; latency of every request):\n")
	if err := p.Err(); err != nil {
		return err
	}
	if err := StepsTable(w, c); err != nil {
		return err
	}
	if len(c.Headroom) > 0 {
		at := ""
		if d := diagnosed(c); d != nil {
			at = fmt.Sprintf(" at %s req/s (step %d)", rate(d.Rate), d.N)
		}
		p.F("\nHeadroom%s, fullest first:\n", at)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  resource\tsubject\tused\tof its limit\n")
		for _, h := range c.Headroom {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", h.Resource, printable.String(h.Subject), Percent(h.Share), printable.String(h.Text))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if d := c.Diagnosis; d != nil {
		p.F("\nDiagnosis of that step: %s\n", d.Verdict)
		for _, f := range d.Findings {
			if f.Status == Active {
				p.F("  [%s] %s (%s)\n", f.Severity, f.Title, f.ID)
			}
		}
	}
	for _, n := range c.Notes {
		p.F("Note: %s\n", n)
	}
	p.F("\nSearch: %d steps in %s of --max-duration %s; %s.\n", len(c.Steps), shortDur(c.Elapsed.Round(time.Second)), shortDur(c.MaxDuration), c.Stopped)
	return p.Err()
}

// StepsTable writes the steps: each rate's goodput, success share and
// latency percentiles, and whether it met the SLO.
func StepsTable(w io.Writer, c *Capacity) error {
	w = printable.NewWriter(w)
	// The verdict, last, is no column: it is as long as it needs.
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\n", strings.Join(StepColumns(c), "\t"))
	for _, s := range c.Steps {
		fmt.Fprintf(tw, "%s\n", strings.Join(StepRow(c, s), "\t"))
	}
	return tw.Flush()
}

// StepColumns are the steps table's header.
func StepColumns(c *Capacity) []string {
	cols := []string{"#", "phase", "rate/s", "conns", "goodput/s", "success"}
	for _, p := range stepPercentiles(c) {
		if p == 100 {
			cols = append(cols, "max")
		} else {
			cols = append(cols, Objective{Percentile: p}.Name())
		}
	}
	return append(cols, "  SLO")
}

// StepRow is one step as the table shows it.
func StepRow(c *Capacity, s Step) []string {
	r := "-"
	if s.Rate > 0 {
		r = rate(s.Rate)
	}
	row := []string{strconv.Itoa(s.N), s.Phase, r, strconv.FormatUint(s.Opened, 10), rate(s.Goodput), Percent(s.SuccessShare)}
	for _, p := range stepPercentiles(c) {
		v, ok := s.At(p)
		if ok {
			row = append(row, Dur(v))
		} else {
			row = append(row, "-")
		}
	}
	verdict := "  met"
	switch {
	case s.Phase == "probe":
		verdict = "  (closed loop)"
	case !s.Pass:
		verdict = "  broke: " + strings.Join(s.Broke, "; ")
	}
	if s.Collapsed {
		verdict += " (collapsed: stopped early)"
	}
	if len(s.GeneratorLimited) > 0 {
		verdict += " (the load generator may have limited it)"
	}
	return append(row, verdict)
}

// stepPercentiles are the percentiles the table shows: p50, p99 and the
// SLO's.
func stepPercentiles(c *Capacity) []float64 {
	ps := []float64{50, 99}
	for _, o := range c.SLO.Objectives {
		found := false
		for _, p := range ps {
			found = found || p == o.Percentile
		}
		if !found {
			ps = append(ps, o.Percentile)
		}
	}
	return append(ps, 100)
}

// CapacityVerifyText writes both searches of capacity --verify-with and
// the capacity before → after.
func CapacityVerifyText(w io.Writer, v *CapacityVerify) error {
	w = printable.NewWriter(w)
	p := NewPrinter(w)
	p.F("\nCapacity before → after %s:\n", v.Plan)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	row := func(name, a, b string) { fmt.Fprintf(tw, "  %s\t%s\t→ %s\n", name, a, b) }
	row("capacity (req/s within "+v.Before.SLO.Text+")", capText(v.Before), capText(v.After))
	row("bracket", bracketText(v.Before), bracketText(v.After))
	row("limited by", limitsText(v.Before), limitsText(v.After))
	if err := tw.Flush(); err != nil {
		return err
	}
	if v.Change > 0 {
		p.F("  change: ×%.2f\n", v.Change)
	}
	return p.Err()
}

func capText(c *Capacity) string {
	if c == nil {
		return "-"
	}
	if c.GeneratorLimited && c.Bracket.Fail > 0 {
		return "≥ " + rate(c.CapacityRPS)
	}
	return rate(c.CapacityRPS)
}

func bracketText(c *Capacity) string {
	if c == nil {
		return "-"
	}
	switch {
	case c.Bracket.Pass == 0 && c.Bracket.Fail == 0:
		return "-"
	case c.Bracket.Fail == 0:
		return "≥ " + rate(c.Bracket.Pass) + " (none broke it)"
	case c.Bracket.Pass == 0:
		return "< " + rate(c.Bracket.Fail) + " (none met it)"
	}
	return rate(c.Bracket.Pass) + "–" + rate(c.Bracket.Fail)
}

func limitsText(c *Capacity) string {
	if c == nil || len(c.LimitedBy) == 0 {
		return "-"
	}
	ids := make([]string, len(c.LimitedBy))
	for i, l := range c.LimitedBy {
		ids[i] = string(l.ID)
	}
	return strings.Join(ids, ", ")
}

func basisText(b string) string {
	switch b {
	case BasisHeadroom:
		return "at its limit, though no rule made the finding"
	case BasisQueued:
		return "where the requests waited, though no resource was at its limit"
	case BasisFullest:
		return "the fullest resource: the diagnosed step met the SLO, so none was seen at its limit"
	case BasisGenerator:
		return "the load generator, not the service"
	}
	return "the diagnosis's finding"
}

// diagnosed is the step that was diagnosed, or nil.
func diagnosed(c *Capacity) *Step {
	for i := len(c.Steps) - 1; i >= 0; i-- {
		if c.Steps[i].Phase == "diagnosis" {
			return &c.Steps[i]
		}
	}
	return nil
}

// rate formats requests a second: "78", "1.2", "14.9k".
func rate(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1fk", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// Rate formats requests a second as the capacity report does.
func Rate(v float64) string { return rate(v) }

func rates(vs []float64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = rate(v)
	}
	return strings.Join(s, ", ")
}

func durs(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = Dur(d)
	}
	return strings.Join(s, ", ")
}

// shortDur is a duration as a person writes it: "100ms", "2m", "1m30s".
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
