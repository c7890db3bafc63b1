package cpuprof

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"

	"github.com/netdoctor/netdoctor/internal/perf"
	"github.com/netdoctor/netdoctor/internal/symtab"
)

// Hz bounds: 49 Hz is cheap and rarely in step with a 100 Hz or 1000 Hz
// timer in the code profiled; 99 Hz is perf's own default for -F.
const (
	DefaultHz = 99
	MinHz     = 1
	MaxHz     = 999
)

// drainEvery is how often the rings are read: at 99 Hz and ~1 KiB a
// sample, 100 ms of a CPU is ~10 KiB of a 256 KiB ring.
const drainEvery = 100 * time.Millisecond

// maxOtherPIDs bounds the other processes whose samples are counted by
// PID; more (a fork storm) are counted together.
const maxOtherPIDs = 4096

// maxOthers is how many other processes a profile names.
const maxOthers = 5

// Options say what to profile.
type Options struct {
	// Hz is the sampling frequency per CPU (DefaultHz when 0).
	Hz int
	// CPUs are the CPUs to sample, every online one when nil.
	CPUs []int
	// Servers names the server each process to keep belongs to ("nginx
	// 0.0.0.0:80"). It is called every second while the profile runs,
	// so that a worker born meanwhile is kept.
	Servers func() map[int]string
	// Proc is the procfs root, "/proc" when empty.
	Proc string
}

// Profiler is a profile being taken.
type Profiler struct {
	opts    Options
	sampler *perf.Sampler
	start   time.Time
	stop    chan struct{}
	done    chan struct{}

	// What the drain goroutine gathers; read after done.
	servers   map[int]string
	stacks    map[string]*stack
	procs     map[int]*proc
	others    map[int]uint64
	total     uint64
	idle      uint64
	kept      uint64
	sampling  time.Duration
	readErrs  []error
	keyBuf    []byte
	otherMore uint64
	self      int
	// selfSamples are netdoctor's own (its load generator's, when the
	// load runs on this host).
	selfSamples uint64
}

type stack struct {
	pid            int
	kernel, user   []uint64
	count, periods uint64
}

type proc struct {
	comm   string
	server string
	maps   []symtab.Mapping
	err    error
}

// Start begins profiling.
func Start(o Options) (*Profiler, error) {
	if o.Hz == 0 {
		o.Hz = DefaultHz
	}
	if o.Hz < MinHz || o.Hz > MaxHz {
		return nil, fmt.Errorf("profile frequency %d Hz: want %d to %d", o.Hz, MinHz, MaxHz)
	}
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	s, err := perf.Open(o.Hz, o.CPUs)
	if err != nil {
		return nil, err
	}
	p := &Profiler{opts: o, sampler: s, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}),
		stacks: map[string]*stack{}, procs: map[int]*proc{}, others: map[int]uint64{}, self: os.Getpid()}
	if o.Servers != nil {
		p.servers = o.Servers()
	}
	go p.drain()
	return p, nil
}

// drain reads the rings every drainEvery until Stop, on a thread of its
// own so that its CPU time is its cost.
func (p *Profiler) drain() {
	defer close(p.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	t := time.NewTicker(drainEvery)
	defer t.Stop()
	every := int(time.Second / drainEvery)
	for i := 1; ; i++ {
		select {
		case <-p.stop:
			p.read()
			p.sampling += threadCPU() - cpu0
			return
		case <-t.C:
		}
		p.read()
		if i%every == 0 && p.opts.Servers != nil {
			p.servers = p.opts.Servers()
		}
	}
}

func (p *Profiler) read() {
	if err := p.sampler.Read(p.add); err != nil && len(p.readErrs) < 3 {
		p.readErrs = append(p.readErrs, err)
	}
}

// add counts one sample: a server's call chain is kept, another
// process's only counted.
func (p *Profiler) add(s *perf.Sample) {
	p.total++
	pid := int(s.PID)
	if pid == 0 {
		p.idle++
		return
	}
	server, ok := p.servers[pid]
	if !ok {
		if pid == p.self {
			p.selfSamples++ // netdoctor is never another process that takes the CPU
			return
		}
		if _, known := p.others[pid]; known || len(p.others) < maxOtherPIDs {
			p.others[pid]++
		} else {
			p.otherMore++
		}
		return
	}
	p.kept++
	pr := p.procs[pid]
	if pr == nil {
		pr = &proc{server: server, comm: comm(p.opts.Proc, pid)}
		pr.maps, pr.err = symtab.ReadMaps(p.opts.Proc, pid)
		p.procs[pid] = pr
	}
	k := p.keyBuf[:0]
	k = binary.LittleEndian.AppendUint32(k, s.PID)
	k = binary.LittleEndian.AppendUint32(k, uint32(len(s.Kernel)))
	for _, a := range s.Kernel {
		k = binary.LittleEndian.AppendUint64(k, a)
	}
	for _, a := range s.User {
		k = binary.LittleEndian.AppendUint64(k, a)
	}
	p.keyBuf = k
	st := p.stacks[string(k)]
	if st == nil {
		st = &stack{pid: pid, kernel: slices.Clone(s.Kernel), user: slices.Clone(s.User)}
		p.stacks[string(k)] = st
	}
	st.count++
	st.periods += s.Period
}

// Stop ends the profile and names its call chains. The cost of naming
// is measured on the calling goroutine's thread.
func (p *Profiler) Stop() *Profile {
	close(p.stop)
	<-p.done
	end := time.Now()
	cpus := p.sampler.CPUs()
	p.sampler.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	out := &Profile{Hz: p.opts.Hz, Start: p.start, Duration: end.Sub(p.start), CPUs: cpus,
		Samples: p.total, Kept: p.kept, Idle: p.idle, Lost: p.sampler.Lost, Self: p.selfSamples}
	for _, err := range p.readErrs {
		out.Notes = append(out.Notes, "reading the rings: "+err.Error())
	}
	out.Others = p.topOthers()
	pp, notes := p.build(end, cpus)
	out.Notes = append(out.Notes, notes...)
	var buf bytes.Buffer
	if err := pp.Write(&buf); err != nil {
		out.Notes = append(out.Notes, "writing the pprof profile: "+err.Error())
	}
	out.PProf = buf.Bytes()
	out.Cost = Cost{Sampling: p.sampling, Symbolize: threadCPU() - cpu0}
	if out.Duration > 0 {
		out.Cost.CoreShare = float64(p.sampling) / float64(out.Duration)
	}
	return out
}

func (p *Profiler) topOthers() []Other {
	var out []Other
	for pid, n := range p.others {
		out = append(out, Other{PID: pid, Samples: n})
	}
	slices.SortFunc(out, func(a, b Other) int { return cmp.Or(cmp.Compare(b.Samples, a.Samples), cmp.Compare(a.PID, b.PID)) })
	out = out[:min(len(out), maxOthers)]
	for i := range out {
		out[i].Comm = comm(p.opts.Proc, out[i].PID)
	}
	return out
}

// build names every kept call chain and makes the pprof profile.
func (p *Profiler) build(end time.Time, cpus []int) (*profile.Profile, []string) {
	var notes []string
	k, err := symtab.LoadKernel(os.DirFS("/"))
	if err != nil {
		notes = append(notes, "kernel symbols: "+err.Error())
	}
	r := symtab.NewResolver(p.opts.Proc, k)
	pp := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		DefaultSampleType: "cpu",
		PeriodType:        &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:            int64(time.Second) / int64(p.opts.Hz),
		TimeNanos:         p.start.UnixNano(),
		DurationNanos:     end.Sub(p.start).Nanoseconds(),
		Comments:          []string{fmt.Sprintf("netdoctor: perf cpu-clock at %d Hz on CPUs %v, the servers' processes", p.opts.Hz, cpus)},
	}
	kernelMap := &profile.Mapping{ID: 1, File: KernelModule, HasFunctions: true}
	pp.Mapping = append(pp.Mapping, kernelMap)
	mappings := map[string]*profile.Mapping{}
	funcs := map[[2]string]*profile.Function{}
	locs := map[[2]uint64]*profile.Location{}
	function := func(name, file string) *profile.Function {
		key := [2]string{name, file}
		f := funcs[key]
		if f == nil {
			f = &profile.Function{ID: uint64(len(pp.Function) + 1), Name: name, SystemName: name, Filename: file}
			funcs[key] = f
			pp.Function = append(pp.Function, f)
		}
		return f
	}
	mapping := func(m symtab.Mapping) *profile.Mapping {
		name := m.Path
		if name == "" {
			name = "[anonymous]"
		}
		pm := mappings[name]
		if pm == nil {
			pm = &profile.Mapping{ID: uint64(len(pp.Mapping) + 1), Start: m.Start, Limit: m.End, Offset: m.Offset, File: name, HasFunctions: true}
			mappings[name] = pm
			pp.Mapping = append(pp.Mapping, pm)
		}
		return pm
	}
	location := func(pm *profile.Mapping, addr uint64, fn string) *profile.Location {
		key := [2]uint64{pm.ID, addr}
		l := locs[key]
		if l == nil {
			l = &profile.Location{ID: uint64(len(pp.Location) + 1), Mapping: pm, Address: addr}
			if fn != "" {
				l.Line = []profile.Line{{Function: function(fn, pm.File)}}
			}
			locs[key] = l
			pp.Location = append(pp.Location, l)
		}
		return l
	}
	keys := make([]string, 0, len(p.stacks))
	for k := range p.stacks {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a deterministic profile
	var mapErrs []string
	for _, k := range keys {
		st := p.stacks[k]
		pr := p.procs[st.pid]
		var chain []*profile.Location
		for i, a := range st.kernel {
			look := a
			if i > 0 {
				look-- // a return address: the call is just before it
			}
			f := r.KernelFrame(look)
			chain = append(chain, location(kernelMap, a, f.Func))
		}
		for i, a := range st.user {
			look := a
			if i > 0 || len(st.kernel) > 0 {
				look--
			}
			f := r.UserFrame(st.pid, pr.maps, look)
			if f.Mapping < 0 {
				chain = append(chain, location(mapping(symtab.Mapping{}), a, ""))
				continue
			}
			chain = append(chain, location(mapping(pr.maps[f.Mapping]), a, f.Func))
		}
		if len(chain) == 0 {
			continue
		}
		pp.Sample = append(pp.Sample, &profile.Sample{
			Location: chain,
			Value:    []int64{int64(st.count), int64(st.periods)},
			Label:    map[string][]string{LabelServer: {pr.server}, LabelProcess: {pr.comm}},
			NumLabel: map[string][]int64{LabelPID: {int64(st.pid)}},
		})
		if pr.err != nil && len(mapErrs) < 3 {
			mapErrs = append(mapErrs, fmt.Sprintf("pid %d: %v", st.pid, pr.err))
			pr.err = nil
		}
	}
	if len(mapErrs) > 0 {
		notes = append(notes, "process mappings not read, their frames unnamed: "+strings.Join(mapErrs, "; "))
	}
	if errs := r.Errors(); len(errs) > 0 {
		slices.Sort(errs)
		notes = append(notes, fmt.Sprintf("%d mapped files not read, their frames unnamed: %s", len(errs), strings.Join(errs[:min(len(errs), 3)], "; ")))
	}
	if os.Geteuid() != 0 {
		// Kernel addresses only for root (WithoutKernelAddresses).
		stripKernel(pp)
	}
	if err := pp.CheckValid(); err != nil {
		notes = append(notes, "pprof profile: "+err.Error())
	}
	return pp, notes
}

// comm reads a process's command name.
func comm(proc string, pid int) string {
	b, err := os.ReadFile(proc + "/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "(exited)"
	}
	return strings.TrimSpace(string(b))
}

// errBusy is returned when another profile runs: perf rings are per
// CPU, and two profiles at once would each pay for both.
var errBusy = errors.New("another on-CPU profile is running")

// one admits one profile at a time per process (a run's, the agent's).
var one sync.Mutex

// Exclusive starts a profile unless another runs, and returns it with
// the function that must be called when it is stopped.
func Exclusive(o Options) (*Profiler, func(), error) {
	if !one.TryLock() {
		return nil, nil, errBusy
	}
	p, err := Start(o)
	if err != nil {
		one.Unlock()
		return nil, nil, err
	}
	return p, one.Unlock, nil
}

// IsBusy reports whether err says another profile runs.
func IsBusy(err error) bool { return errors.Is(err, errBusy) }
