package cli

import "testing"

// TestPaired runs, four at a time, longest first, the measuring tests
// whose fault and judgement stand beside others of them: 22 tests, 150
// s one after the other, 50 s three at a time, 38 s so (its first 17
// took 105 s one after the other, 50 s two at a time, 36 s three at a
// time, with 47 CPU-seconds: half a CPU idle). Each builds its own lab
// or namespace and is judged from its own namespaces' counters, sockets
// and servers, with a load that leaves a CPU idle: the fault bounds it
// (a queue of 8, a pool of 2, 64 files, a limiter, a stopped worker, a
// tbf's drops, 5 % loss) or its rate does (the distributed load's
// workers, open loop at 1600 requests a second, which a loaded 2-core
// machine keeps), not the CPUs. None sets a host-wide setting or judges
// the host's CPUs idle; the kernel log's SYN flooding messages the SYN
// queue's test causes name its listener's address, its own lab's (the
// rule matches address and port, not the port alone as when syn-flood's
// could not go beside another lab), and the drop ledger's tests are
// judged by flow, as another service's drops on the host must be.
// TestLight's lighter pool holds the loads that must not meet these: the
// two pools run one after the other, as every test of the package not
// run by one of them runs alone.
func TestPaired(t *testing.T) {
	runTogether(t, 4, []subtest{
		{"MergeWorkers", testMergeWorkers},
		{"RunStoppedReuseport", testRunStoppedReuseport},
		{"RunNginxLimitReq", testRunNginxLimitReq},
		{"RunDNATOverflowRetransmits", testRunDNATOverflowRetransmits},
		{"MergeRunWorkers", testMergeRunWorkers},
		{"MergeWorkersNginx", testMergeWorkersNginx},
		{"RunAgentKilled", testRunAgentKilled},
		{"RunPHPMaxChildren", testRunPHPMaxChildren},
		{"RunUpstreamPortExhaustion", testRunUpstreamPortExhaustion},
		{"RunAcceptQueue", testRunAcceptQueue},
		{"RunFDLimit", testRunFDLimit},
		{"RunAcceptOverflowRetransmits", testRunAcceptOverflowRetransmits},
		{"RunStoppedNginxWorker", testRunStoppedNginxWorker},
		{"RunQdiscDrops", testRunQdiscDrops},
		{"RunServerExits", testRunServerExits},
		{"RunRandomLoss", testRunRandomLoss},
		{"RunServerNetns", testRunServerNetns},
		{"RunSYNQueue", testRunSYNQueue},
		{"RunSomaxconn", testRunSomaxconn},
		{"RunScript", testRunScript},
		{"RunVerifyScript", testRunVerifyScript},
		{"CheckLossyResolver", testCheckLossyResolver},
	})
}
