// Package cpuprof profiles the servers of a run on CPU: the per-CPU
// cpu-clock samples of internal/perf, kept for the servers' processes
// and counted for the others, named by internal/symtab, and written as a
// pprof profile (github.com/google/pprof/profile) that `go tool pprof`
// opens. A Summary says per server which functions were hot and, where
// netdoctor knows them, what they do (searching for a free local port,
// spinning on a lock, checksums, copies); Flame is the tree the HTML
// report draws.
package cpuprof

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// Profile is a finished on-CPU profile, as a run bundle keeps it.
type Profile struct {
	Hz       int           `json:"hz"`
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration_ns"`
	// CPUs are the CPUs sampled; Samples every sample they gave (every
	// process, idle included), Kept the servers' and Idle the idle ones'.
	CPUs    []int  `json:"cpus"`
	Samples uint64 `json:"samples"`
	Kept    uint64 `json:"kept"`
	Idle    uint64 `json:"idle"`
	// Lost are the samples the kernel dropped for a full ring.
	Lost uint64 `json:"lost,omitempty"`
	// Self are netdoctor's own samples (its load generator's, when the
	// load runs on this host): never counted among the others.
	Self uint64 `json:"self,omitempty"`
	// Others are the busiest processes that were not the servers, on
	// the same CPUs: who else took them.
	Others []Other `json:"others,omitempty"`
	// Cost is what profiling cost netdoctor.
	Cost Cost `json:"cost"`
	// Notes say what could not be named, and why.
	Notes []string `json:"notes,omitempty"`
	// PProf is the profile in pprof's format (gzip'd protocol buffer):
	// one sample per distinct call chain, with the server, process and
	// PID as labels.
	PProf []byte `json:"pprof"`
}

// Other is a process that was no server, and its samples.
type Other struct {
	PID     int    `json:"pid"`
	Comm    string `json:"comm"`
	Samples uint64 `json:"samples"`
}

// Cost is the CPU netdoctor spent profiling: draining the rings while
// the profile ran (Sampling, and that as a share of one core over the
// profile's duration) and naming the addresses at its end (Symbolize).
// The kernel's own part (taking each sample and walking its call chain,
// charged to whatever the CPU was running) is not in it: bench/ measures
// that end to end.
type Cost struct {
	Sampling  time.Duration `json:"sampling_cpu_ns"`
	Symbolize time.Duration `json:"symbolize_cpu_ns"`
	CoreShare float64       `json:"core_share"`
}

// Label keys of the pprof samples.
const (
	LabelServer  = "server"
	LabelProcess = "process"
	LabelPID     = "pid"
)

// KernelModule is the mapping file of kernel frames in the pprof profile.
const KernelModule = "[kernel.kallsyms]"

// Parse decodes the pprof profile.
func (p *Profile) Parse() (*profile.Profile, error) {
	if p == nil || len(p.PProf) == 0 {
		return nil, fmt.Errorf("no profile")
	}
	return profile.ParseData(p.PProf)
}

// WithoutKernelAddresses is p with its kernel frames named but not
// placed: their addresses, and the kernel mapping's range, are zero. A
// kernel address tells where the kernel was loaded (what KASLR hides):
// only a local root caller gets them (a profile of run, taken by root on
// its host); the agent's API serves profiles without them, symbols only.
func (p *Profile) WithoutKernelAddresses() (*Profile, error) {
	pp, err := p.Parse()
	if err != nil {
		return nil, err
	}
	stripKernel(pp)
	var buf bytes.Buffer
	if err := pp.Write(&buf); err != nil {
		return nil, err
	}
	q := *p
	q.PProf = buf.Bytes()
	return &q, nil
}

// stripKernel zeroes the addresses of pp's kernel frames and mapping.
func stripKernel(pp *profile.Profile) {
	for _, m := range pp.Mapping {
		if m.File == KernelModule {
			m.Start, m.Limit, m.Offset = 0, 0, 0
		}
	}
	for _, l := range pp.Location {
		if l.Mapping != nil && l.Mapping.File == KernelModule {
			l.Address = 0
		}
	}
}

// Summary is what the reports say of a profile.
type Summary struct {
	Hz       int             `json:"hz"`
	Duration time.Duration   `json:"duration_ns"`
	Samples  uint64          `json:"samples"`
	Lost     uint64          `json:"lost,omitempty"`
	Self     uint64          `json:"self,omitempty"`
	Cost     Cost            `json:"cost"`
	Servers  []ServerSummary `json:"servers,omitempty"`
	Others   []Other         `json:"others,omitempty"`
	// IdleShare is the share of the CPUs' samples that found them idle.
	IdleShare float64  `json:"idle_share"`
	Notes     []string `json:"notes,omitempty"`
}

// ServerSummary is one server's part of a profile.
type ServerSummary struct {
	Server  string `json:"server"`
	Samples uint64 `json:"samples"`
	// CPU is the on-CPU time its samples stand for.
	CPU time.Duration `json:"cpu_ns"`
	// Top are its hottest functions by their own samples (self), with
	// their inclusive share (total).
	Top []Func `json:"top"`
	// Activities are what its time went to, where netdoctor knows the
	// functions: each with the share of its samples in which one of
	// them is on the stack.
	Activities []Activity `json:"activities,omitempty"`
	// KernelShare is the share of its samples taken in the kernel.
	KernelShare float64 `json:"kernel_share"`
}

// Func is one function's share of a server's samples.
type Func struct {
	Name   string  `json:"name"`
	Module string  `json:"module"`
	Self   float64 `json:"self"`
	Total  float64 `json:"total"`
	// Meaning is what netdoctor knows the function does, "" otherwise.
	Meaning Kind `json:"meaning,omitempty"`
}

// Activity is a kind of work, its share and the functions that showed it.
type Activity struct {
	Kind  Kind     `json:"kind"`
	Share float64  `json:"share"`
	Funcs []string `json:"functions"`
}

// Node is a flame graph's frame: d3-flame-graph's input format.
type Node struct {
	Name     string  `json:"name"`
	Value    int64   `json:"value"`
	Children []*Node `json:"children,omitempty"`
}

// topN is how many functions a summary names per server.
const topN = 8

// Summarize reads the profile for the reports.
func Summarize(p *Profile) (*Summary, error) {
	if p == nil {
		return nil, nil
	}
	s := &Summary{Hz: p.Hz, Duration: p.Duration, Samples: p.Samples, Lost: p.Lost, Self: p.Self, Cost: p.Cost, Others: p.Others, Notes: p.Notes}
	if p.Samples > 0 {
		s.IdleShare = float64(p.Idle) / float64(p.Samples)
	}
	pp, err := p.Parse()
	if err != nil {
		return s, err
	}
	type acc struct {
		samples, kernel int64
		cpu             int64
		self, total     map[string]int64
		module          map[string]string
		kinds           map[Kind]int64
		kindFuncs       map[Kind]map[string]bool
	}
	by := map[string]*acc{}
	var order []string
	for _, smp := range pp.Sample {
		name := label(smp, LabelServer)
		a := by[name]
		if a == nil {
			a = &acc{self: map[string]int64{}, total: map[string]int64{}, module: map[string]string{}, kinds: map[Kind]int64{}, kindFuncs: map[Kind]map[string]bool{}}
			by[name] = a
			order = append(order, name)
		}
		n := smp.Value[0]
		a.samples += n
		if len(smp.Value) > 1 {
			a.cpu += smp.Value[1]
		}
		seen := map[string]bool{}
		seenKind := map[Kind]bool{}
		for i, loc := range smp.Location {
			fn, mod := frame(loc)
			if i == 0 {
				a.self[fn] += n
				if mod == KernelModule {
					a.kernel += n
				}
			}
			if !seen[fn] {
				seen[fn] = true
				a.total[fn] += n
				a.module[fn] = mod
			}
			if k := meaningOf(fn, mod); k != "" {
				if a.kindFuncs[k] == nil {
					a.kindFuncs[k] = map[string]bool{}
				}
				a.kindFuncs[k][fn] = true
				if !seenKind[k] {
					seenKind[k] = true
					a.kinds[k] += n
				}
			}
		}
	}
	for _, name := range order {
		a := by[name]
		ss := ServerSummary{Server: name, Samples: uint64(a.samples), CPU: time.Duration(a.cpu)}
		if a.samples == 0 {
			continue
		}
		ss.KernelShare = float64(a.kernel) / float64(a.samples)
		fns := make([]string, 0, len(a.self))
		for fn := range a.self {
			fns = append(fns, fn)
		}
		slices.SortFunc(fns, func(x, y string) int { return cmp.Or(cmp.Compare(a.self[y], a.self[x]), cmp.Compare(x, y)) })
		for _, fn := range fns[:min(len(fns), topN)] {
			ss.Top = append(ss.Top, Func{Name: fn, Module: a.module[fn], Self: float64(a.self[fn]) / float64(a.samples),
				Total: float64(a.total[fn]) / float64(a.samples), Meaning: meaningOf(fn, a.module[fn])})
		}
		for k, n := range a.kinds {
			act := Activity{Kind: k, Share: float64(n) / float64(a.samples)}
			for fn := range a.kindFuncs[k] {
				act.Funcs = append(act.Funcs, fn)
			}
			slices.SortFunc(act.Funcs, func(x, y string) int { return cmp.Or(cmp.Compare(a.total[y], a.total[x]), cmp.Compare(x, y)) })
			act.Funcs = act.Funcs[:min(len(act.Funcs), 3)]
			ss.Activities = append(ss.Activities, act)
		}
		slices.SortFunc(ss.Activities, func(x, y Activity) int { return cmp.Or(cmp.Compare(y.Share, x.Share), cmp.Compare(x.Kind, y.Kind)) })
		s.Servers = append(s.Servers, ss)
	}
	slices.SortFunc(s.Servers, func(x, y ServerSummary) int {
		return cmp.Or(cmp.Compare(y.Samples, x.Samples), cmp.Compare(x.Server, y.Server))
	})
	return s, nil
}

// Flame is the profile as a flame graph: a root, a child per server,
// then the call chains from their outermost frame.
func Flame(p *Profile) (*Node, error) {
	pp, err := p.Parse()
	if err != nil {
		return nil, err
	}
	root := &Node{Name: "all"}
	index := map[*Node]map[string]*Node{}
	child := func(n *Node, name string) *Node {
		m := index[n]
		if m == nil {
			m = map[string]*Node{}
			index[n] = m
		}
		c := m[name]
		if c == nil {
			c = &Node{Name: name}
			m[name] = c
			n.Children = append(n.Children, c)
		}
		return c
	}
	for _, smp := range pp.Sample {
		n := smp.Value[0]
		root.Value += n
		cur := child(root, label(smp, LabelServer))
		cur.Value += n
		for i := len(smp.Location) - 1; i >= 0; i-- {
			fn, _ := frame(smp.Location[i])
			cur = child(cur, fn)
			cur.Value += n
		}
	}
	var sortTree func(*Node)
	sortTree = func(n *Node) {
		slices.SortFunc(n.Children, func(x, y *Node) int { return cmp.Compare(x.Name, y.Name) })
		for _, c := range n.Children {
			sortTree(c)
		}
	}
	sortTree(root)
	return root, nil
}

// frame names a location: its function, or the module it is in.
func frame(loc *profile.Location) (fn, module string) {
	if loc.Mapping != nil {
		module = loc.Mapping.File
	}
	if len(loc.Line) > 0 && loc.Line[0].Function != nil && loc.Line[0].Function.Name != "" {
		return loc.Line[0].Function.Name, module
	}
	switch {
	case module == "":
		return "[unknown]", module
	case strings.HasPrefix(module, "["): // [vdso], [anonymous]
		return module, module
	}
	return "[" + baseName(module) + "]", module
}

func baseName(p string) string {
	if i := bytes.LastIndexByte([]byte(p), '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func label(s *profile.Sample, key string) string {
	if v := s.Label[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
