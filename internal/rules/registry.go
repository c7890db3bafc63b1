package rules

import "github.com/netdoctor/netdoctor/internal/report"

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
	IDs   []report.FindingID
	Check func(in *Input) []report.Finding
}

// Registry is every rule, in the order they run.
var Registry = []Rule{
	{Name: "listen", Scope: PerSide, IDs: []report.FindingID{AcceptQueueOverflow, SynQueueOverflow}, Check: checkListen},
	{Name: "conntrack", Scope: PerSide, IDs: []report.FindingID{ConntrackTableFull}, Check: checkConntrack},
	{Name: "ports", Scope: PerSide, IDs: []report.FindingID{EphemeralPortExhaustion}, Check: checkPorts},
	{Name: "churn", Scope: PerSide, IDs: []report.FindingID{UpstreamConnectionChurn}, Check: checkChurn},
	{Name: "timewait", Scope: PerSide, IDs: []report.FindingID{TimewaitBucketOverflow}, Check: checkTimeWait},
	{Name: "loss", Scope: PerSide, IDs: []report.FindingID{PacketLoss}, Check: checkLoss},
	{Name: "nic", Scope: PerSide, IDs: []report.FindingID{NICDrops}, Check: checkNIC},
	{Name: "fd", Scope: PerSide, IDs: []report.FindingID{FDLimit}, Check: checkFD},
	{Name: "dns", Scope: PerSide, IDs: []report.FindingID{DNSMisconfigured, DNSSlow, ReverseDNSLookup}, Check: checkDNS},
	{Name: "sysctl", Scope: PerSide, IDs: []report.FindingID{RiskySysctl}, Check: checkSysctls},
	{Name: "cpu", Scope: PerHost, IDs: []report.FindingID{CPUSaturated}, Check: checkCPU},
	{Name: "buffers", Scope: PerSide, IDs: []report.FindingID{SocketBufferLimit}, Check: checkBuffers},
	{Name: "bandwidth", Scope: PerSide, IDs: []report.FindingID{BandwidthSaturated}, Check: checkBandwidth},
	{Name: "neighbour", Scope: PerSide, IDs: []report.FindingID{NeighbourTableOverflow}, Check: checkNeighbour},
	{Name: "loadgen", Scope: PerRun, IDs: []report.FindingID{LoadGeneratorSaturated}, Check: checkLoadGen},
	{Name: "nagle", Scope: PerRun, IDs: []report.FindingID{NagleDelayedACK}, Check: checkNagle},
	{Name: "workerpool", Scope: PerRun, IDs: []report.FindingID{WorkerPoolExhausted}, Check: checkWorkerPool},
	{Name: "appslow", Scope: Symptom, IDs: []report.FindingID{AppSlow}, Check: checkAppSlow},
}
