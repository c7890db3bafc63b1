package rules

import (
	"slices"

	"github.com/netdoctor/netdoctor/internal/report"
)

// Class is what a finding ID means to someone who sees only the ID: an
// alert, a dashboard, a metric's label. docs/findings.md's summary says
// the same (TestClassesMatchDocs).
type Class struct {
	// Meaning is the summary's "meaning" column.
	Meaning string
	// Critical: the rule can report it active and critical; otherwise
	// an active finding is at most a warning.
	Critical bool
	// Latent: the rule also reports it latent, a risk at scale.
	Latent bool
}

// Classes holds a Class for every finding ID in Registry.
var Classes = map[report.FindingID]Class{
	AcceptQueueOverflow:     {Meaning: "the application accepts connections more slowly than they arrive; the kernel drops the completed handshakes it cannot queue", Critical: true, Latent: true},
	SynQueueOverflow:        {Meaning: "half-open connection requests overflow the listener's SYN queue (flood or tiny backlog)", Critical: true},
	ConntrackTableFull:      {Meaning: "the netfilter connection-tracking table is full and new flows are dropped", Critical: true, Latent: true},
	EphemeralPortExhaustion: {Meaning: "outgoing connections to one destination use up the local port range; `connect()` fails with EADDRNOTAVAIL", Critical: true, Latent: true},
	UpstreamConnectionChurn: {Meaning: "a new connection per request to one upstream: TIME_WAIT piles up, ports and CPU are spent on connection setup", Critical: true},
	TimewaitBucketOverflow:  {Meaning: "the TIME_WAIT table hit `tcp_max_tw_buckets`; closing sockets skip TIME_WAIT"},
	NagleDelayedACK:         {Meaning: "Nagle's algorithm on the server meets delayed ACK on the client: about 40 ms per small request/response", Critical: true},
	DNSMisconfigured:        {Meaning: "name lookups cannot work: no nameserver configured, or none answers", Critical: true},
	DNSSlow:                 {Meaning: "lookups answer, but slowly or only from some nameservers"},
	ReverseDNSLookup:        {Meaning: "reverse (PTR) lookups hang; anything that resolves client addresses stalls per connection", Latent: true},
	WorkerPoolExhausted:     {Meaning: "the application's worker pool (php-fpm `pm.max_children`, nginx `worker_connections`, or any server's threads) is full; requests queue or time out", Critical: true},
	DependencyPoolSaturated: {Meaning: "a server's few connections to a dependency (database, cache, backend) are busy all the time; requests queue for a connection", Critical: true},
	DependencySlow:          {Meaning: "most of a request's time is spent waiting for a dependency's answers"},
	AppSlow:                 {Meaning: "the server holds requests while CPU and network are idle (locks, sleeps, slow backends)"},
	FDLimit:                 {Meaning: "a process (or the host) is out of file descriptors; `accept()` fails with EMFILE and connections wait in the accept queue", Critical: true, Latent: true},
	PacketLoss:              {Meaning: "TCP retransmits a significant share of what it sends", Critical: true},
	BandwidthSaturated:      {Meaning: "a link or shaper is at its rate; queues add latency and drop", Critical: true},
	NICDrops:                {Meaning: "an interface, or the per-CPU input backlog, drops packets"},
	NeighbourTableOverflow:  {Meaning: "the neighbour (ARP/NDP) table is full; packets to next hops it cannot add are dropped", Critical: true},
	SocketBufferLimit:       {Meaning: "data dropped because a socket buffer or TCP's global memory limit ran out"},
	CPUSaturated:            {Meaning: "CPUs have no idle time left; other numbers are then symptoms"},
	CPUQuotaThrottling:      {Meaning: "a server's cgroup uses up its CPU quota each period; its threads wait, runnable, for the next one while CPUs may idle", Critical: true},
	RunQueueContention:      {Meaning: "a server's threads wait, runnable, for CPUs that other processes hold", Critical: true},
	LoadGeneratorSaturated:  {Meaning: "the load generator, not the server, is the bottleneck of a benchmark"},
	UnexplainedDistress:     {Meaning: "the load shows distress that no other finding explains: netdoctor does not call it healthy", Critical: true},
	RiskySysctl:             {Meaning: "a setting that copy-paste tuning guides recommend and that hurts on current kernels", Latent: true},
}

// Continuous reports whether an agent's diagnosis, which runs without a
// load, can make the finding: the PerSide and PerHost rules', and those
// that judge the dependencies it traces.
func Continuous(id report.FindingID) bool {
	for _, r := range Registry {
		if (r.Scope == PerSide || r.Scope == PerHost || r.Traced) && slices.Contains(r.IDs, id) {
			return true
		}
	}
	return false
}
