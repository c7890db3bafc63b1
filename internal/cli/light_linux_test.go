package cli

import (
	"sync"
	"testing"
)

// subtest is one test of a pool that runs side by side.
type subtest struct {
	name string
	run  func(*testing.T)
}

// runTogether runs the tests as subtests of t, width at a time, in the
// order given, each t.Run from a goroutine of the pool's own, none with
// t.Parallel: the width is the pool's, not go test's -parallel, and the
// order is kept (go test releases the tests it paused in no order, so
// that a 43 s capacity search could start last, when the others were
// done, and run alone). t returns when all have.
func runTogether(t *testing.T, width int, tests []subtest) {
	next := make(chan subtest)
	var wg sync.WaitGroup
	for range width {
		wg.Go(func() {
			for tc := range next {
				t.Run(tc.name, tc.run)
			}
		})
	}
	for _, tc := range tests {
		next <- tc
	}
	close(next)
	wg.Wait()
}

// TestLight runs, six at a time, longest first, the measuring tests
// whose load is light: some hundred requests a second, bound by a
// dependency's or a worker's sleep, by a shaped link or a delayed
// answer, not by the CPUs; each builds its own lab and what it measures
// is timed against sleeps or the program's own clock, not against the
// machine's speed. Three at a time they kept half a CPU busy (57
// CPU-seconds in 113 s), so six at a time judge as one alone would (the
// capacity searches' knees of 80 requests a second within 4 %). One
// after the other they take some 295 s; two at a time, as go test's
// -parallel 2 paired them in no order, 154 s; four at a time 72 to 78
// s; six, 53 s, the longest capacity search's 44 s and a little more.
// None writes the kernel log's SYN flooding messages, or makes a fault
// another's judgement would read as its own (TestLab's besideAnother
// says which do), and none meets TestPaired's loads: the tests run one
// pool after the other.
func TestLight(t *testing.T) {
	runTogether(t, 6, []subtest{
		{"CapacityDependencyPool", testCapacityDependencyPool},
		{"CapacityWorkerPool", testCapacityWorkerPool},
		{"CapacityWorkers", testCapacityWorkers},
		{"CapacityKubernetes", testCapacityKubernetes},
		{"PathProbeRun", testPathProbeRun},
		{"RunDependencyPool", testRunDependencyPool},
		{"RunDependencyAgent", testRunDependencyAgent},
		{"RunServerLogWords", testRunServerLogWords}, // 20 connections, every tenth request held 2 s
		{"RunDependencyLong", testRunDependencyLong},
		{"CapacityGeneratorLimited", testCapacityGeneratorLimited}, // 2 connections, 40 requests a second
		{"RunSlowReaders", testRunSlowReaders},
		{"RunKubernetes", testRunKubernetes},
		{"PathProbeStreams", testPathProbeStreams},
		{"CheckDependencyPool", testCheckDependencyPool},
		{"RunDependencyChain", testRunDependencyChain},
		{"RunDependencyElsewhere", testRunDependencyElsewhere},
		{"RunDependencyUnixPHP", testRunDependencyUnixPHP},
		{"RunDependencyUnix", testRunDependencyUnix},
		{"RunTimeSplitLongRTT", testRunTimeSplitLongRTT},   // 4 connections at 40 requests a second over 50 ms
		{"RunFirewallRateLimit", testRunFirewallRateLimit}, // 20 new connections a second pass the limit
		{"RunPathMTUBlackhole", testRunPathMTUBlackhole},   // 8 connections whose responses die at the router
		{"RunNagle", testRunNagle},                         // 4 connections, each answered 40 ms late
		{"CheckDependencyChain", testCheckDependencyChain},
		{"AgentDependency", testAgentDependency},
	})
}
