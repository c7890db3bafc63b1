package cpuprof

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// burnForProfile burns CPU on a thread of its own until stop, and keeps
// in burned the CPU time that thread has had: what a profile at Hz can
// have sampled of it, whatever else the machine runs.
//
//go:noinline
func burnForProfile(stop *atomic.Bool, burned *atomic.Int64) int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	x := 1
	for n := 0; !stop.Load(); n++ {
		for i := range 1000 {
			x = x*31 + i
		}
		if n%1000 == 0 {
			burned.Store(int64(threadCPU()))
		}
	}
	return x
}

// TestProfileSelf profiles this process as a "server" while one of its
// goroutines burns CPU: the summary names the burning function as the
// hottest, the pprof profile opens in go tool pprof, and the cost is
// reported.
func TestProfileSelf(t *testing.T) {
	self := os.Getpid()
	p, err := Start(Options{Hz: 99, Servers: func() map[int]string { return map[int]string{self: "test :0"} }})
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skip("needs root or CAP_PERFMON:", err)
		}
		t.Fatal(err)
	}
	var stop atomic.Bool
	var burned atomic.Int64
	go burnForProfile(&stop, &burned)
	// Half a second of the burner's CPU is some 50 samples at 99 Hz, however
	// long a busy machine takes to give it that.
	poll.True(t, time.Minute, "half a second of the burner's CPU", func() bool { return time.Duration(burned.Load()) >= 500*time.Millisecond })
	stop.Store(true)
	prof := p.Stop()
	if prof.Kept < 20 || len(prof.PProf) == 0 {
		t.Fatalf("kept %d of %d samples, pprof %d bytes; notes %v", prof.Kept, prof.Samples, len(prof.PProf), prof.Notes)
	}
	if prof.Cost.Sampling <= 0 || prof.Cost.CoreShare <= 0 || prof.Cost.CoreShare > 0.5 {
		t.Errorf("cost %+v", prof.Cost)
	}
	sum, err := Summarize(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Servers) != 1 || len(sum.Servers[0].Top) == 0 {
		t.Fatalf("summary %+v", sum)
	}
	top := sum.Servers[0].Top[0]
	if !strings.HasSuffix(top.Name, "cpuprof.burnForProfile") || top.Self < 0.5 {
		t.Errorf("hottest %+v, want burnForProfile with most samples; top %+v", top, sum.Servers[0].Top)
	}
	root, err := Flame(prof)
	if err != nil || len(root.Children) != 1 || root.Children[0].Name != "test :0" || root.Value != int64(prof.Kept) {
		t.Errorf("flame root %+v, %v", root, err)
	}
	file := filepath.Join(t.TempDir(), "cpu.pprof")
	os.WriteFile(file, prof.PProf, 0o600)
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=5", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "burnForProfile") {
		t.Errorf("go tool pprof -top: %v\n%s", err, out)
	}
}

func TestMeaning(t *testing.T) {
	for fn, want := range map[string]Kind{
		"__inet_hash_connect": PortSearch, "native_queued_spin_lock_slowpath": LockSpin, "csum_partial": Checksum,
		"_copy_to_iter": Copy, "nf_conntrack_in": Conntrack, "main.handler": "", "runtime.scanobject": GC,
	} {
		if got := Meaning(fn); got != want {
			t.Errorf("Meaning(%s) = %q, want %q", fn, got, want)
		}
		if want != "" && want.Describe() == "" {
			t.Errorf("%s has no description", want)
		}
	}
}
