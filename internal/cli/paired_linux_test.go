package cli

import "testing"

// TestPaired runs, three at a time, longest first, the measuring tests
// whose fault and judgement stand beside others of them: 17 tests, 105
// s one after the other, 50 s two at a time, 36 s so (47 CPU-seconds:
// they leave half a CPU idle). Each builds its own lab (namespaces,
// subnet, servers) and is judged from its own namespaces' counters,
// sockets and servers, with a load that leaves a CPU idle: the fault
// bounds it (a queue of 8, a pool of 2, 64 files, a limiter, a stopped
// worker, a tbf's drops, 5 % loss), not the CPUs. None sets a host-wide
// setting or judges the host's CPUs idle; the kernel log's SYN flooding
// messages the SYN queue's test causes name its listener's address, its
// own lab's (the rule matches address and port, not the port alone as
// when syn-flood's could not go beside another lab). TestLight's
// lighter pool holds the loads that must not meet these: the two pools
// run one after the other, as every test of the package not run by one
// of them runs alone.
func TestPaired(t *testing.T) {
	runTogether(t, 3, []subtest{
		{"RunStoppedReuseport", testRunStoppedReuseport},
		{"RunNginxLimitReq", testRunNginxLimitReq},
		{"RunAgentKilled", testRunAgentKilled},
		{"RunPHPMaxChildren", testRunPHPMaxChildren},
		{"RunUpstreamPortExhaustion", testRunUpstreamPortExhaustion},
		{"RunAcceptQueue", testRunAcceptQueue},
		{"RunFDLimit", testRunFDLimit},
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
