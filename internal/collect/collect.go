package collect

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/netdoctor/netdoctor/internal/dropmon"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/kmsg"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/procnet"
	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// ErrUnavailable marks a collector whose kernel interface, module or
// permission is missing: a status, not a failure of netdoctor.
var ErrUnavailable = errors.New("unavailable")

// Collector fills its part of a snapshot. Collectors run in order on one
// thread inside the observed namespace, so a later collector may read what
// an earlier one stored (sockdiag reads Tcp.CurrEstab and the port range).
type Collector interface {
	Name() string
	Collect(ctx context.Context, s *evidence.Snapshot) error
}

// A staged collector reads in Read what must be of the snapshot's moment
// and leaves its slow rest to the finish Read returns, which Snapshot
// runs after every other collector. The collectors behind it then read
// their counters close to the snapshot's time, over which rates between
// snapshots are taken: naming a new drop location (250 ms of
// /proc/kallsyms on a busy machine) once pushed the interface counters
// that late and made a tbf at its rate read 75 % one second and 123 %
// the next.
type staged interface {
	Collector
	Read(ctx context.Context, s *evidence.Snapshot) (finish func() error, err error)
}

// Config says what to observe.
type Config struct {
	// NetNS is the namespace to observe, resolved by the caller (the
	// zero NS is the caller's own).
	NetNS netns.NS
	// PIDs are extra processes of interest besides listener owners.
	PIDs []int
	// DNS enables the resolver probe; DNSEvery probes on every Nth
	// snapshot only (0 or 1: every snapshot).
	DNS      bool
	DNSName  string
	DNSEvery int
	// DNSRepeat is how many A queries each nameserver gets per probe
	// (default 1): enough of them measure its loss and latency.
	DNSRepeat int
	// DNSWhen, when set, holds probes until it returns true: run probes
	// the server's resolver once its workers are seen in a name lookup,
	// even without --dns.
	DNSWhen func() bool
	// DNSDelay holds the first probe until this long after New: run
	// probes during its load, not in the quiet baseline before it.
	DNSDelay time.Duration
	// Drops asks for the kernel's drop reasons: the process's drop
	// monitor (dropmon.Shared) is started with the first Snapshotter
	// that asks and closed with the last, and each snapshot reads the
	// namespace's counts from it, or says why there are none.
	Drops bool
	// Proc overrides the procfs root (tests).
	Proc *procnet.Proc
	// Sys overrides the sysfs root, os.DirFS("/sys") (tests).
	Sys fs.FS
	Log *slog.Logger
}

// Snapshotter takes snapshots of one namespace.
type Snapshotter struct {
	cfg        Config
	Host       evidence.Host
	collectors []Collector
	kmsg       *kmsgCollector
	// release gives the drop monitor back.
	release func()
	// senders accounts the connections' senders across snapshots;
	// ends reads the kernel's notices of their ends (nil where it
	// cannot).
	senders *sockdiag.Senders
	ends    *sockdiag.Ends
}

// New prepares the collectors for cfg.NetNS. It fails only
// when the namespace itself cannot be observed; every other problem shows
// up later as a collector status. Callers must Close the Snapshotter.
func New(cfg Config) (*Snapshotter, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	p := procnet.Default()
	if cfg.Proc != nil {
		p = *cfg.Proc
	}
	s := &Snapshotter{cfg: cfg}
	s.Host = hostInfo(cfg.NetNS)
	// Entering the namespace once here turns a permission problem into a
	// clear error before any sampling starts.
	s.senders = sockdiag.NewSenders()
	err := cfg.NetNS.Do(func() error {
		ino, err := netns.Inode("")
		s.Host.NetNSInode = ino
		if err != nil {
			return err
		}
		// The notices of connections' ends come to a socket of the
		// namespace: opened here, read from any thread. Without them
		// (not root), connections are accounted at their last look.
		var eerr error
		if s.ends, eerr = sockdiag.WatchEnds(s.senders); eerr != nil {
			cfg.Log.Info("connections' ends unavailable; they are accounted at their last look", "why", eerr)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.kmsg = newKmsg()
	var dm dropSource
	if cfg.Drops {
		m, release, err := dropmon.Shared()
		if err != nil {
			dm.why = dropmon.Why(err)
			cfg.Log.Info("drop reasons unavailable; the rules use the kernel's counters", "why", err)
		} else {
			dm.m, s.release = m, release
		}
	}
	s.collectors = Default(cfg, p, s.Host.NetNSInode, s.kmsg, dm, s.senders)
	return s, nil
}

// Close releases the kernel log reader and the drop monitor.
func (s *Snapshotter) Close() {
	s.kmsg.close()
	s.ends.Close()
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// Snapshot runs every collector once. It never fails: each collector's
// outcome is in the snapshot's Status.
func (s *Snapshotter) Snapshot(ctx context.Context) evidence.Snapshot {
	snap := evidence.Snapshot{Time: time.Now()}
	err := s.cfg.NetNS.Do(func() error {
		var later []func()
		for _, c := range s.collectors {
			start := time.Now()
			st, ok := c.(staged)
			if !ok {
				err := c.Collect(ctx, &snap)
				snap.Status = append(snap.Status, status(c.Name(), err, time.Since(start)))
				continue
			}
			finish, err := st.Read(ctx, &snap)
			i, took := len(snap.Status), time.Since(start)
			snap.Status = append(snap.Status, status(c.Name(), err, took))
			if err == nil && finish != nil {
				later = append(later, func() {
					start := time.Now()
					err := finish()
					snap.Status[i] = status(c.Name(), err, took+time.Since(start))
				})
			}
		}
		for _, f := range later {
			f()
		}
		return nil
	})
	if err != nil {
		// The namespace vanished between snapshots.
		snap.Status = append(snap.Status, evidence.Status{Collector: "netns", State: evidence.StateError, Error: err.Error()})
	}
	return snap
}

// partial marks an error that came with usable data.
type partial struct{ err error }

func (p partial) Error() string { return p.err.Error() }
func (p partial) Unwrap() error { return p.err }

func status(name string, err error, d time.Duration) evidence.Status {
	st := evidence.Status{Collector: name, State: evidence.StateOK, Duration: d}
	if err == nil {
		return st
	}
	st.Error = err.Error()
	var p partial
	switch {
	case errors.As(err, &p):
		st.State = evidence.StatePartial
	case errors.Is(err, ErrUnavailable), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission),
		errors.Is(err, kmsg.ErrUnavailable):
		st.State = evidence.StateUnavailable
	case errors.Is(err, procnet.ErrParse), errors.Is(err, sockdiag.ErrPartial):
		st.State = evidence.StatePartial
	default:
		st.State = evidence.StateError
	}
	return st
}

func hostInfo(ns netns.NS) evidence.Host {
	h := evidence.Host{NetNS: ns.String(), CPUs: numCPU(), UserHZ: 100}
	h.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = string(trimSpace(b))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		h.BootID = string(trimSpace(b))
	}
	h.PID = os.Getpid()
	if fi, err := os.Stat("/proc/self/ns/pid"); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			h.PIDNSInode = st.Ino
		}
	}
	return h
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
