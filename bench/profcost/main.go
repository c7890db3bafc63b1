// Command profcost measures what netdoctor's on-CPU profile costs, against
// `perf record -a -g` at the same frequency over the same time, alternated
// round by round: the CPU of the profiler itself (netdoctor: the thread
// that drains the rings, and naming the addresses at the end; perf: its
// whole process, writing perf.data), as a share of one core. While each
// runs, a workload of two processes keeps the CPUs busy in a function of
// their own, so that every sample has a deep user stack to copy and name:
// the profile's worst case on this host.
//
//	sudo go run ./bench/profcost -hz 49,99 -seconds 20 -rounds 3
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netdoctor/netdoctor/internal/cpuprof"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "spin" {
		spin()
		return
	}
	hzList := flag.String("hz", "49,99", "frequencies to measure, comma-separated")
	secs := flag.Int("seconds", 20, "length of each profile")
	rounds := flag.Int("rounds", 3, "rounds, each tool going first in every other")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "profcost: needs root (perf events of every process)")
		os.Exit(1)
	}
	perfBin, perfErr := exec.LookPath("perf")
	var pids []int
	for range 2 {
		c := exec.Command("/proc/self/exe", "spin")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "profcost:", err)
			os.Exit(1)
		}
		defer func() { c.Process.Kill(); c.Wait() }()
		pids = append(pids, c.Process.Pid)
	}
	servers := map[int]string{}
	for _, p := range pids {
		servers[p] = "spin"
	}
	d := time.Duration(*secs) * time.Second
	tmp, err := os.MkdirTemp("", "profcost")
	if err != nil {
		fmt.Fprintln(os.Stderr, "profcost:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(tmp)
	fmt.Printf("profiles of %v, %d rounds, workload: 2 processes spinning (pids %v), %d CPUs\n\n", d, *rounds, pids, runtime.NumCPU())
	fmt.Println("| Hz | round | netdoctor: samples kept | draining, % of a core | naming, CPU | all, % of a core | perf record -a -g: % of a core | ratio netdoctor/perf |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|")
	for _, h := range strings.Split(*hzList, ",") {
		hz, err := strconv.Atoi(h)
		if err != nil {
			fmt.Fprintln(os.Stderr, "profcost: -hz:", err)
			os.Exit(2)
		}
		var alls, perfs []float64
		for r := range *rounds {
			var nd, all, pf float64
			var kept uint64
			var naming time.Duration
			ndRun := func() {
				var before syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &before)
				p, err := cpuprof.Start(cpuprof.Options{Hz: hz, Servers: func() map[int]string { return servers }})
				if err != nil {
					fmt.Fprintln(os.Stderr, "profcost:", err)
					os.Exit(1)
				}
				time.Sleep(d)
				prof := p.Stop()
				var after syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &after)
				nd = prof.Cost.CoreShare
				naming = prof.Cost.Symbolize
				kept = prof.Kept
				all = cpuSecs(after.Utime, after.Stime) - cpuSecs(before.Utime, before.Stime)
				all /= d.Seconds()
			}
			pfRun := func() {
				if perfErr != nil {
					pf = -1
					return
				}
				c := exec.Command(perfBin, "record", "-q", "-F", strconv.Itoa(hz), "-a", "-g", "-o", filepath.Join(tmp, "perf.data"), "--", "sleep", strconv.Itoa(*secs))
				if err := c.Run(); err != nil {
					fmt.Fprintln(os.Stderr, "profcost: perf record:", err)
					pf = -1
					return
				}
				u := c.ProcessState.SysUsage().(*syscall.Rusage)
				pf = cpuSecs(u.Utime, u.Stime) / d.Seconds()
			}
			if r%2 == 0 {
				ndRun()
				pfRun()
			} else {
				pfRun()
				ndRun()
			}
			alls, perfs = append(alls, all), append(perfs, pf)
			ratio := "-"
			if pf > 0 {
				ratio = fmt.Sprintf("%.2f", all/pf)
			}
			fmt.Printf("| %d | %d | %d | %.3f %% | %v | %.3f %% | %.3f %% | %s |\n", hz, r+1, kept, 100*nd, naming.Round(time.Millisecond), 100*all, 100*pf, ratio)
		}
		fmt.Printf("| %d | median | | | | %.3f %% | %.3f %% | |\n", hz, 100*median(alls), 100*median(perfs))
	}
}

func cpuSecs(u, s syscall.Timeval) float64 {
	return float64(u.Sec+s.Sec) + float64(u.Usec+s.Usec)/1e6
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// spin keeps a CPU busy in a few nested calls until killed.
func spin() {
	for {
		runtime.KeepAlive(work(1 << 20)) // computed, not optimized away
	}
}

//go:noinline
func work(n int) uint64 {
	h := uint64(14695981039346656037)
	for i := range n {
		h = step(h, uint64(i))
	}
	return h
}

//go:noinline
func step(h, i uint64) uint64 { return (h ^ i) * 1099511628211 }
