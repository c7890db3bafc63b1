package cli

import "testing"

// TestPaired runs, two at a time (-parallel 2 of the measuring pass),
// the measuring tests whose fault and judgement stand beside another of
// them: 17 tests, 105 s one after the other, about 55 s so. Each builds
// its own lab (namespaces, subnet, servers) and is judged from its own
// namespaces' counters, sockets and servers, with a load that leaves a
// CPU idle: the fault bounds it (a queue of 8, a pool of 2, 64 files, a
// limiter, a stopped worker, a tbf's drops, 5 % loss), not the CPUs.
// None sets a host-wide setting or judges the host's CPUs idle; the
// kernel log's SYN flooding messages the SYN queue's test causes name
// its listener's address, its own lab's (the rule matches address and
// port, not the port alone as when syn-flood's could not go beside
// another lab); the lighter pool of lightLoad, which runs after
// them, holds the loads that must not meet these. A test of its own
// would run alone: a subtest here runs beside one other of this list
// only, as its parent waits for them.
func TestPaired(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"RunAgentKilled", testRunAgentKilled},
		{"RunQdiscDrops", testRunQdiscDrops},
		{"RunNginxLimitReq", testRunNginxLimitReq},
		{"RunVerifyScript", testRunVerifyScript},
		{"RunAcceptQueue", testRunAcceptQueue},
		{"RunServerNetns", testRunServerNetns},
		{"RunServerExits", testRunServerExits},
		{"RunPHPMaxChildren", testRunPHPMaxChildren},
		{"RunUpstreamPortExhaustion", testRunUpstreamPortExhaustion},
		{"RunFDLimit", testRunFDLimit},
		{"RunRandomLoss", testRunRandomLoss},
		{"RunSYNQueue", testRunSYNQueue},
		{"RunSomaxconn", testRunSomaxconn},
		{"RunStoppedReuseport", testRunStoppedReuseport},
		{"RunStoppedNginxWorker", testRunStoppedNginxWorker},
		{"CheckLossyResolver", testCheckLossyResolver},
		{"RunScript", testRunScript},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}
