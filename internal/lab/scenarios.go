package lab

import (
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// Scenario is one seed case rebuilt in a lab. Its faults come in stages,
// in the order the seed's author found and fixed them: stage N has the
// faults of stages N and later, the fixes of the earlier ones. Stage 1,
// the default, has every fault at once; stage len(Stages)+1 is fixed.
type Scenario struct {
	Name    string
	Seed    string // which seed case and section it reproduces
	Summary string
	// Reports are the findings netdoctor must report active at stage 1.
	Reports []report.FindingID
	Stages  []Stage
	// Load is the run's load, the same before and after the fix: typed
	// options, as the lab hands them to the run (Job), never flags.
	Load load.Options
	// Article is what the seed's author measured; docs/lab.md has it
	// beside what the lab measures.
	Article string
	// Persists are findings the fix leaves active, no longer critical,
	// because what raises them outlives the fix (a flood goes on; the
	// fix makes the server survive it).
	Persists []report.FindingID
	// Note explains what a reader might otherwise take for a defect.
	Note string
}

// Stage is one fault and the fix that removes it.
type Stage struct {
	Fault   string
	Fix     string
	Reports []report.FindingID // findings this stage's fault raises when it is the first one left
}

// Fixed is the stage number at which every fault is fixed.
func (s *Scenario) Fixed() int { return len(s.Stages) + 1 }

// Faults describes the faults present at stage n.
func (s *Scenario) Faults(n int) string {
	var f []string
	for i := n - 1; i >= 0 && i < len(s.Stages); i++ {
		f = append(f, s.Stages[i].Fault)
	}
	if len(f) == 0 {
		return "none"
	}
	return strings.Join(f, "; ")
}

// Fixes describes what changes from stage n to stage to.
func (s *Scenario) Fixes(n, to int) string {
	var f []string
	for i := n - 1; i >= 0 && i < to-1 && i < len(s.Stages); i++ {
		f = append(f, s.Stages[i].Fix)
	}
	return strings.Join(f, "; ")
}

// Expected is what netdoctor must report active at stage n.
func (s *Scenario) Expected(n int) []report.FindingID {
	if n == 1 {
		return s.Reports
	}
	if n-1 < len(s.Stages) {
		return s.Stages[n-1].Reports
	}
	return nil
}

// Lookup finds a scenario by name.
func Lookup(name string) (*Scenario, bool) {
	for i := range Scenarios {
		if Scenarios[i].Name == name {
			return &Scenarios[i], true
		}
	}
	return nil, false
}

// Names lists the scenarios' names.
func Names() []string {
	var n []string
	for _, s := range Scenarios {
		n = append(n, s.Name)
	}
	return n
}

// Scenarios are the seed cases, then servers no rule was written for,
// in the order of docs/lab.md, and the negative control. Names are part
// of the interface.
var Scenarios = []Scenario{
	{
		Name:    "nginx-php-throughput",
		Seed:    "000 (all five stages)",
		Summary: "nginx → php-fpm hello world under 200 connections collapses; each fix uncovers the next fault",
		Reports: []report.FindingID{rules.ConntrackTableFull, rules.AcceptQueueOverflow, rules.UpstreamConnectionChurn, rules.EphemeralPortExhaustion},
		Stages: []Stage{
			{Fault: "stateful firewall with nf_conntrack_max 200", Fix: "nf_conntrack_max 262144", Reports: []report.FindingID{rules.ConntrackTableFull}},
			{Fault: "php-fpm pm.max_children 5 (pm dynamic)", Fix: "pm.max_children 256 (static): more than nginx can hold open", Reports: []report.FindingID{rules.WorkerPoolExhausted}},
			{Fault: "net.core.somaxconn 10 (caps nginx's backlog 511 and php-fpm's)", Fix: "somaxconn 4096 with nginx backlog=4096 and listen.backlog = 4096", Reports: []report.FindingID{rules.AcceptQueueOverflow}},
			{Fault: "ip_local_port_range 20000 20050 (51 ports) with fastcgi_keep_conn off", Fix: "ip_local_port_range 15000 65000", Reports: []report.FindingID{rules.EphemeralPortExhaustion, rules.UpstreamConnectionChurn}},
			{Fault: "a new FastCGI connection per request with tcp_tw_reuse 0", Fix: "upstream keepalive 128 with fastcgi_keep_conn on", Reports: []report.FindingID{rules.UpstreamConnectionChurn}},
		},
		Load:    load.Options{Connections: 200, Threads: 2, Duration: 5 * time.Second, Timeout: 2 * time.Second},
		Article: "189 req/s all non-2xx → 5382 (conntrack) → 4683 (max_children) → 6185 (backlog) → 3208 (ports) → 5180 req/s, no non-2xx (keepalive, tw_reuse)",
	},
	{
		Name:    "nginx-nagle",
		Seed:    "001 §7",
		Summary: "nginx with tcp_nodelay off answers keep-alive clients ~40 ms late: Nagle meets delayed ACK",
		Reports: []report.FindingID{rules.NagleDelayedACK},
		Stages: []Stage{
			{Fault: "nginx tcp_nodelay off, sendfile on, a 900-byte page over keep-alive", Fix: "tcp_nodelay on (nginx's default)", Reports: []report.FindingID{rules.NagleDelayedACK}},
		},
		Load:    load.Options{Connections: 20, Threads: 1, Duration: 5 * time.Second},
		Article: "wrk p50 44 ms vs 7.8 ms on the other port, 2283 → 12384 req/s after tcp_nodelay on",
	},
	{
		Name:    "dns-no-resolver",
		Seed:    "001 §4",
		Summary: "the application looks up its backend's name per request, and the server's resolv.conf lists no nameserver",
		Reports: []report.FindingID{rules.DNSMisconfigured},
		Stages: []Stage{
			{Fault: "empty resolv.conf in the server's namespace", Fix: "resolv.conf pointing at a local dnsmasq cache", Reports: []report.FindingID{rules.DNSMisconfigured}},
		},
		Load:    load.Options{Connections: 20, Threads: 1, Duration: 4 * time.Second},
		Article: "nslookup: “no servers could be reached”",
	},
	{
		Name:    "dns-slow-resolver",
		Seed:    "001 §4",
		Summary: "the application looks up its backend's name per request through a far resolver",
		Reports: []report.FindingID{rules.DNSSlow, rules.AppSlow},
		Stages: []Stage{
			{Fault: "resolv.conf points at a resolver 150 ms away (a relay that holds each query, as there is no netem)", Fix: "resolv.conf pointing at a local dnsmasq cache", Reports: []report.FindingID{rules.DNSSlow, rules.AppSlow}},
		},
		Load:    load.Options{Connections: 20, Threads: 1, Duration: 4 * time.Second},
		Article: "far resolver: 140 ms ping, lookups of 10–15 s when lossy; with a dnsmasq cache 0.49 s then 0.011 s",
	},
	{
		Name:    "ping-ptr-timeout",
		Seed:    "001 §5",
		Summary: "the application resolves each client's address to a name (as HostnameLookups, UseDNS or ping do) and PTR queries go unanswered",
		Reports: []report.FindingID{rules.ReverseDNSLookup, rules.AppSlow},
		Stages: []Stage{
			{Fault: "the resolver never answers PTR queries (glibc options timeout:1 attempts:2); the page calls gethostbyaddr(client)", Fix: "a resolver that answers private-range PTR locally (dnsmasq bogus-priv)", Reports: []report.FindingID{rules.ReverseDNSLookup, rules.AppSlow}},
		},
		Load:    load.Options{Connections: 20, Threads: 1, Duration: 5 * time.Second, Timeout: 4 * time.Second},
		Article: "ping -c 3 took 11 s: two PTR lookups of 5 s went unanswered; ping -n is instant",
	},
	{
		Name:    "syn-flood",
		Seed:    "001 §6",
		Summary: "an hping3 SYN flood fills nginx's SYN queue while a normal client measures",
		Reports: []report.FindingID{rules.SynQueueOverflow},
		Stages: []Stage{
			{Fault: "SYN flood at 2000/s from random sources; tcp_syncookies 0, tcp_max_syn_backlog 256", Fix: "tcp_syncookies 1 (the default)", Reports: []report.FindingID{rules.SynQueueOverflow}},
		},
		Load:     load.Options{Connections: 10, Threads: 1, Duration: 5 * time.Second, NoKeepAlive: true},
		Article:  "193 connections in SYN_RECV, curl times out; tcp_max_syn_backlog 256",
		Persists: []report.FindingID{rules.SynQueueOverflow},
		Note:     "after the fix the flood goes on: " + string(rules.SynQueueOverflow) + " stays, as a warning that SYN cookies now answer it",
	},
	{
		Name:    "conntrack-sawtooth",
		Seed:    "002",
		Summary: "nginx proxy → backend (new connection per request) behind a stateful firewall: TPS climbs, collapses, climbs",
		Reports: []report.FindingID{rules.ConntrackTableFull},
		Stages: []Stage{
			{Fault: "stateful firewall, nf_conntrack_max 2000, TIME_WAIT entries kept 3 s (the article's 120 s cycle, shortened to fit the run)", Fix: "nf_conntrack_max 262144", Reports: []report.FindingID{rules.ConntrackTableFull}},
		},
		Load:    load.Options{Connections: 100, Threads: 1, Duration: 10 * time.Second},
		Article: "TPS climbs to ~300, collapses, climbs again, regularly; dmesg “nf_conntrack: table full, dropping packet”; 1000 TPS without iptables",
	},
	{
		Name:    "accept-queue-backlog",
		Seed:    "003",
		Summary: "a 35 ms mock with a listen backlog of 50 under heavy concurrency; behind it a contended log lock",
		Reports: []report.FindingID{rules.AcceptQueueOverflow},
		Stages: []Stage{
			{Fault: "listen backlog 50 with 100 worker threads under 400 connections", Fix: "listen backlog 5000", Reports: []report.FindingID{rules.AcceptQueueOverflow}},
			{Fault: "every request appends to one log under an exclusive flock held 2 ms", Fix: "log level raised: no log line per request", Reports: []report.FindingID{rules.AppSlow}},
		},
		Load:     load.Options{Connections: 400, Threads: 2, Duration: 5 * time.Second, NoKeepAlive: true, Timeout: 3 * time.Second},
		Article:  "errors (connection reset) from ~3800 TPS; Send-Q 50 on :5000; backlog 5000 → no errors; at 4600 threads RT grows with idle CPU, threads BLOCKED on the log lock; log level → RT 37 ms",
		Persists: []report.FindingID{rules.AppSlow},
		Note:     "after both fixes the mock still sleeps 35 ms per request, as the seed's did: " + string(rules.AppSlow) + " stays, now naming that sleep, and p50 falls to the sleep plus queueing",
	},
	{
		Name:    "kv-redis",
		Seed:    "004",
		Summary: "nginx + Lua → redis, connecting per request; TIME_WAIT bucket table too small",
		Reports: []report.FindingID{rules.UpstreamConnectionChurn, rules.TimewaitBucketOverflow},
		Stages: []Stage{
			{Fault: "a new redis connection per request (red:close()), tcp_max_tw_buckets 1024", Fix: "red:set_keepalive(10000, 1024): a pool per worker", Reports: []report.FindingID{rules.UpstreamConnectionChurn, rules.TimewaitBucketOverflow}},
		},
		Load:    load.Options{Connections: 100, Threads: 1, Duration: 5 * time.Second},
		Article: "strace: a connect() to redis per request; upstream keepalive 1024: TPS 3K → 9K, RT 300 ms → 20 ms; dmesg “time wait bucket table overflow”",
	},
	// The scenarios below run servers netdoctor knows nothing of: it
	// must find their faults from what the kernel and the processes show.
	{
		Name:    "python-pool",
		Seed:    "none (any server: a Python thread pool)",
		Summary: "a Python service with a fixed pool of 4 worker threads, 50 ms off the CPU per request, under 50 connections: requests wait unread in their sockets",
		Reports: []report.FindingID{rules.WorkerPoolExhausted},
		Stages: []Stage{
			{Fault: "4 worker threads for 50 keep-alive connections, each request 50 ms off the CPU", Fix: "64 worker threads", Reports: []report.FindingID{rules.WorkerPoolExhausted}},
		},
		Load:    load.Options{Connections: 50, Threads: 1, Duration: 5 * time.Second},
		Article: "no article; the lab: 79 req/s (4 workers / 50 ms), p50 607 ms, 46 of 50 connections with their request unread in Recv-Q → 64 workers: 979 req/s, p50 51 ms",
	},
	{
		Name:    "python-dns",
		Seed:    "none (any server: a threaded Python service)",
		Summary: "a threaded Python service resolves its backend's name per request (getaddrinfo, glibc defaults: timeout 5 s, 2 attempts) and 30 % of the queries to its resolver are lost",
		Reports: []report.FindingID{rules.DNSSlow},
		Stages: []Stage{
			{Fault: "an nft rule drops 30 % of the UDP queries to dnsmasq in the server's namespace", Fix: "no drop rule", Reports: []report.FindingID{rules.DNSSlow}},
		},
		Load:    load.Options{Connections: 20, Threads: 1, Duration: 6 * time.Second, Timeout: 8 * time.Second},
		Article: "no article; the lab: 4–9 req/s, none at all for 4 of the 6 seconds, p99 5.0 s (glibc's timeout), 20 connections left in CLOSE_WAIT → 7.5k req/s, p99 7 ms",
	},
	{
		Name:    "haproxy-reset",
		Seed:    "none (any server: haproxy in front of nginx)",
		Summary: "haproxy opens a backend connection per request and closes it with a reset: connects and resets churn, no TIME_WAIT is left",
		Reports: []report.FindingID{rules.UpstreamConnectionChurn},
		Stages: []Stage{
			{Fault: "haproxy option http-server-close, http-pretend-keepalive and nolinger: a connection to nginx per request, closed by haproxy with a RST", Fix: "keep-alive to the backend with http-reuse always", Reports: []report.FindingID{rules.UpstreamConnectionChurn}},
		},
		Load:    load.Options{Connections: 50, Threads: 1, Duration: 5 * time.Second},
		Article: "no article; the lab: 40k req/s with a connect and a RST per request (TcpActiveOpens = TcpOutRsts ≈ 41k/s), 0 TIME_WAIT → 91k req/s",
	},
	{
		Name:    "proxy-churn",
		Seed:    "none (any server: a home-made Go proxy)",
		Summary: "a home-made proxy connects to its backend per request and closes first, with 100 local ports and tcp_tw_reuse 0: TIME_WAIT holds the ports, connects fail, clients get 502",
		Reports: []report.FindingID{rules.UpstreamConnectionChurn, rules.EphemeralPortExhaustion},
		Stages: []Stage{
			{Fault: "a new backend connection per request, closed by the proxy; ip_local_port_range 20000 20099 (100 ports), tcp_tw_reuse 0", Fix: "a pool of persistent HTTP/1.1 backend connections (--keepalive) and the kernel's default port range (tcp_tw_reuse stays 0)", Reports: []report.FindingID{rules.UpstreamConnectionChurn, rules.EphemeralPortExhaustion}},
		},
		Load:    load.Options{Connections: 50, Threads: 1, Duration: 5 * time.Second},
		Article: "no article; the lab: 99 requests answered, then 100 % 502 (connect: EADDRNOTAVAIL), 100 TIME_WAIT on ports 20000–20099 → 37–39k req/s, no errors",
	},
	{
		Name:    "stall-tenth",
		Seed:    "none (a fault no rule covers)",
		Summary: "a server answers at once except every tenth request, which it holds 5 s: netdoctor must not call it healthy",
		Reports: []report.FindingID{rules.UnexplainedDistress},
		Stages: []Stage{
			{Fault: "every tenth request held 5 s (--every 10 --hold 5s)", Fix: "no stall (--every 0)", Reports: []report.FindingID{rules.UnexplainedDistress}},
		},
		Load:    load.Options{Connections: 20, Threads: 1, Duration: 6 * time.Second, Timeout: 8 * time.Second},
		Article: "no article; the lab: 63 req/s, no response at all for 4 of the 6 seconds, p50 0.14 ms but p99 5.0 s → 86–94k req/s",
	},
	{
		Name:    "healthy",
		Seed:    "none (the negative control)",
		Summary: "nginx → php-fpm as seed 000 ends: its stateful firewall with a roomy table, upstream keepalive, a pool with room, deep queues",
		Load:    load.Options{Connections: 200, Threads: 2, Duration: 5 * time.Second, Timeout: 2 * time.Second},
		Article: "seed 000 after every fix: 5180 req/s, no non-2xx",
	},
}
