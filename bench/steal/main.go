//go:build linux

// Command steal runs a command while every CPU is taken from it in bursts,
// as a shared virtual machine's host takes its vCPUs (steal time): on each
// CPU a real-time thread spins for a random 50 to 150 % of -spin in every
// -every, and -loops busy loops of normal priority share the rest. The
// busy loops of `make stress` only share the CPUs; stolen bursts also
// delay timers, softirqs and wake-ups, which is what failed three
// measuring tests on the CI machine (docs: bench/README.md). Root, for
// SCHED_FIFO; the threads end with the command, whose exit code steal
// returns.
//
//	go run ./bench/steal -spin 30ms -every 100ms -- go test -run TestLight/PathProbeStreams ./internal/cli
package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	spin := flag.Duration("spin", 30*time.Millisecond, "the mean burst taken from each CPU")
	every := flag.Duration("every", 100*time.Millisecond, "the period of the bursts")
	loops := flag.Int("loops", 1, "busy loops of normal priority per CPU beside the bursts")
	flag.Parse()
	if flag.NArg() == 0 || *spin <= 0 || *every <= 3**spin/2 || *loops < 0 {
		fmt.Fprintln(os.Stderr, "usage: steal [-spin D] [-every D > 1.5 × spin] [-loops N] -- COMMAND [ARG...]")
		os.Exit(2)
	}
	for cpu := range runtime.NumCPU() {
		started := make(chan error, 1)
		go burst(cpu, *spin, *every, started)
		if err := <-started; err != nil {
			fmt.Fprintf(os.Stderr, "steal: CPU %d: %v (SCHED_FIFO needs root)\n", cpu, err)
			os.Exit(2)
		}
		for range *loops {
			go func() {
				for x := uint64(1); ; x = x*6364136223846793005 + 1 {
				}
			}()
		}
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "steal:", err)
		os.Exit(2)
	}
}

// burst takes CPU cpu on a thread of its own at real-time priority: a
// random 50 to 150 % of spin in every period.
func burst(cpu int, spin, every time.Duration, started chan<- error) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		started <- err
		return
	}
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 50}, 0); err != nil {
		started <- err
		return
	}
	started <- nil
	for {
		start := time.Now()
		took := spin/2 + rand.N(spin)
		for time.Since(start) < took {
		}
		time.Sleep(every - took)
	}
}
