package rules

import (
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Scope says what evidence a rule reads, and so when it runs.
type Scope int

const (
	// PerSide rules read one namespace's snapshots (Input.Bundle). They
	// are what check and diagnose run; a run runs them once for each side
	// it observed, with the run's context (Input.Run) to add what the
	// load and the servers show.
	PerSide Scope = iota
	// PerHost rules read what the host has once whatever the namespace
	// (/proc/stat): as PerSide, but once per host in a run.
	PerHost
	// PerRun rules need a run: the load and its timeline, the servers
	// behind the port and their workers, both sides.
	PerRun
	// Symptom rules run last and see what the others found
	// (Input.Found): a slowness that no other finding explains.
	Symptom
)

// Rule is one diagnosis: the findings it makes and from what.
type Rule struct {
	// Name is the rule's file in this package without ".go"; its fix,
	// when netdoctor plans one, is in internal/tune/fix_NAME.go.
	Name  string
	Scope Scope
	// IDs are the findings it makes. Each finding ID is made by one rule,
	// in one file, where its constant is declared.
	IDs []report.FindingID
	// Checks says in a few words what the rule looks at, for a report
	// that lists what was checked and found clean.
	Checks string
	Check  func(in *Input) []report.Finding
	// Traced: the rule also judges, without a load, the dependencies
	// check and the agent trace under the host's own traffic
	// (CheckTraced), so the agent can make its findings.
	Traced bool
	// Watches are the counters the rule judges: one that rose in a
	// run's window without a finding is reported as such, never as
	// checked and found clean.
	Watches []string
	// Looks says whether a snapshot holds what the rule reads (nil:
	// always): a rule that had nothing to read checked nothing.
	Looks func(*evidence.Snapshot) bool
}

// Registry is every rule, in the order they run.
var Registry = []Rule{
	{Name: "listen", Scope: PerSide, IDs: []report.FindingID{AcceptQueueOverflow, SynQueueOverflow}, Checks: "accept and SYN queues", Check: checkListen,
		Watches: []string{"TcpExt.ListenOverflows", "TcpExt.ListenDrops", "TcpExt.TCPReqQFullDrop", "TcpExt.TCPReqQFullDoCookies"}},
	{Name: "conntrack", Scope: PerSide, IDs: []report.FindingID{ConntrackTableFull}, Checks: "connection tracking", Check: checkConntrack},
	{Name: "ports", Scope: PerSide, IDs: []report.FindingID{EphemeralPortExhaustion}, Checks: "local ports", Check: checkPorts},
	{Name: "churn", Scope: PerSide, IDs: []report.FindingID{UpstreamConnectionChurn}, Checks: "connections per request to upstreams", Check: checkChurn},
	{Name: "timewait", Scope: PerSide, IDs: []report.FindingID{TimewaitBucketOverflow}, Checks: "the TIME_WAIT table", Check: checkTimeWait,
		Watches: []string{"TcpExt.TCPTimeWaitOverflow"}},
	{Name: "loss", Scope: PerSide, IDs: []report.FindingID{PacketLoss}, Checks: "retransmissions", Check: checkLoss,
		Watches: []string{"Tcp.RetransSegs", "TcpExt.TCPSynRetrans"}},
	{Name: "nic", Scope: PerSide, IDs: []report.FindingID{NICDrops}, Checks: "interface and softnet drops", Check: checkNIC},
	{Name: "fd", Scope: PerSide, IDs: []report.FindingID{FDLimit}, Checks: "file descriptors", Check: checkFD},
	{Name: "dns", Scope: PerSide, IDs: []report.FindingID{DNSMisconfigured, DNSSlow, ReverseDNSLookup}, Checks: "name lookups", Check: checkDNS},
	{Name: "sysctl", Scope: PerSide, IDs: []report.FindingID{RiskySysctl}, Checks: "risky settings", Check: checkSysctls},
	{Name: "cpu", Scope: PerHost, IDs: []report.FindingID{CPUSaturated}, Checks: "CPU", Check: checkCPU},
	{Name: "buffers", Scope: PerSide, IDs: []report.FindingID{SocketBufferLimit}, Checks: "socket memory", Check: checkBuffers,
		Watches: bufferCounters},
	{Name: "bandwidth", Scope: PerSide, IDs: []report.FindingID{BandwidthSaturated}, Checks: "bandwidth and shapers", Check: checkBandwidth},
	{Name: "drops", Scope: PerSide, IDs: []report.FindingID{FirewallDrop, PacketDrops}, Checks: "firewall rules and the kernel's drop reasons", Check: checkDrops,
		Looks: func(s *evidence.Snapshot) bool {
			return s.Firewall != nil || s.Drops != nil && s.Drops.Unavailable == ""
		}},
	{Name: "pmtu", Scope: PerSide, IDs: []report.FindingID{PathMTUBlackhole}, Checks: "the path MTU", Check: checkPMTU,
		Looks: func(s *evidence.Snapshot) bool { return s.Drops != nil && s.Drops.Unavailable == "" }},
	{Name: "neighbour", Scope: PerSide, IDs: []report.FindingID{NeighbourTableOverflow}, Checks: "the neighbour table", Check: checkNeighbour},
	{Name: "loadgen", Scope: PerRun, IDs: []report.FindingID{LoadGeneratorSaturated}, Checks: "the load generator", Check: checkLoadGen},
	{Name: "nagle", Scope: PerRun, IDs: []report.FindingID{NagleDelayedACK}, Checks: "Nagle and delayed ACKs", Check: checkNagle},
	{Name: "workerpool", Scope: PerRun, IDs: []report.FindingID{WorkerPoolExhausted}, Checks: "worker pools", Check: checkWorkerPool},
	{Name: "dependency", Scope: PerRun, IDs: []report.FindingID{DependencyPoolSaturated, DependencySlow}, Checks: "dependencies (databases, caches, backends)", Check: checkDependency, Traced: true},
	{Name: "appslow", Scope: Symptom, IDs: []report.FindingID{AppSlow}, Checks: "time held in the application", Check: checkAppSlow},
	{Name: "distress", Scope: Symptom, IDs: []report.FindingID{UnexplainedDistress}, Checks: "distress no rule explains", Check: checkDistress},
}
