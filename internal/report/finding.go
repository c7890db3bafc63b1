package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// FindingID names a kind of finding: stable, kebab-case, documented in
// docs/findings.md. Each one is declared, as a constant, next to the rule
// that makes it (internal/rules).
type FindingID string

// Severity says how much a finding hurts.
type Severity string

// Severities, most severe first.
const (
	Critical Severity = "critical" // the service is failing: drops, errors
	Warning  Severity = "warning"  // degraded, or at risk
	Info     Severity = "info"
)

// Status says when a finding hurts: active means the problem hurt during
// the window (a counter rose, a queue was full, a lookup failed); latent
// means a setting or a level that will hurt at scale.
type Status string

// Statuses.
const (
	Active Status = "active"
	Latent Status = "latent"
)

// Side is where a run observed something: the evidence's own
// (evidence.Side), named here for the findings that carry it.
type Side = evidence.Side

// Sides of a run. Check and diagnose observe one namespace and leave a
// finding's side empty.
const (
	Server = evidence.Server
	Client = evidence.Client
	// Local is both at once: the server shares the client's namespace,
	// so one set of snapshots is both sides' evidence.
	Local = evidence.Local
)

// Finding is one diagnosed problem. Its fields are the JSON report
// contract (docs/report.md).
type Finding struct {
	ID       FindingID `json:"id"`
	Severity Severity  `json:"severity"`
	Status   Status    `json:"status"`
	Title    string    `json:"title"`
	// Subject names what the finding is about when a rule can fire more
	// than once: a listener, a sysctl, a nameserver, an interface.
	Subject string `json:"subject,omitempty"`
	// About is the subject as data: the parts of it that code reads
	// (relate, tune), so that no one cuts Subject's words apart.
	About About `json:"about,omitzero"`
	// Side says where it was observed in a run; empty for check and
	// diagnose.
	Side     Side   `json:"side,omitempty"`
	Evidence []Item `json:"evidence"`
	// Fix is the fix as a person reads it, rendered from Actions
	// (Render) when a report is made (New, NewLoad); a report read back
	// keeps its own. Rules never set it, and no code parses it.
	Fix []string `json:"fix"`
	// Actions are the fix as data, the one source of Fix: what to run or
	// change, where, and how to keep it. Rules make them (Action).
	Actions []Action `json:"actions,omitempty"`
	// CausedBy names the finding this one is a consequence of, so a
	// report leads with the cause: TIME_WAIT piling up and local ports
	// running out are what upstream connection churn looks like.
	CausedBy FindingID `json:"caused_by,omitempty"`
	// CauseSubject is the cause's subject, which tells it from another
	// finding with the same ID: the full pool of php-fpm, not of nginx.
	CauseSubject string `json:"cause_subject,omitempty"`
	// CauseAtCapacity: the dependency this finding's server waits on is
	// its cause and has no room for more requests at once (a full pool,
	// a full queue), so more connections to it would only queue there:
	// its fix says so in place of a bigger pool (FixOf).
	CauseAtCapacity bool `json:"cause_at_capacity,omitempty"`
	// Dropped says where the packets the finding counts were dropped,
	// when its rule could tell from the evidence: relate names the
	// finding that owns those drops as its cause.
	Dropped *Dropped `json:"dropped,omitempty"`
	// Background says that its counters rose as fast in the quiet
	// seconds before a run's load (the baseline).
	Background *Background `json:"background,omitempty"`
	// Shape is the run's throughput shape when the finding's counters
	// moved with it: a saw-tooth in step with conntrack's drops.
	Shape *Shape `json:"shape,omitempty"`
	// Explains says which share of the run's failed requests (or of its
	// latency) this finding accounts for, when that is measurable.
	Explains string `json:"explains,omitempty"`
	// Failed is how many of a run's failed requests the finding accounts
	// for, as Explains says: what orders a run's causes, most harmful
	// first. It is not part of the report.
	Failed uint64 `json:"-"`
}

// About is what a finding is about, as data. Only the parts that apply
// are set: a listener's address; a server's kind, its listen address
// and the pool; the addresses it connects to; a process; a setting.
type About struct {
	// Server is the kind of server: "nginx", "php-fpm", or a process's
	// name.
	Server string `json:"server,omitempty"`
	// Listen is the address the listener, server or pool listens on
	// ("10.0.0.1:80", "unix:/run/php/fpm.sock").
	Listen string `json:"listen,omitempty"`
	// Pool is a php-fpm pool's name.
	Pool string `json:"pool,omitempty"`
	// Remotes are the addresses it connects to: an upstream's servers,
	// the dependency a server waits on.
	Remotes []string `json:"remotes,omitempty"`
	// PID is the process it is about.
	PID int `json:"pid,omitempty"`
	// Setting is the kernel setting or configuration directive it is
	// about: "net.core.somaxconn", "fs.file-max", "worker_connections".
	Setting string `json:"setting,omitempty"`
	// Interface is the network interface it is about: a saturated
	// link, one that drops.
	Interface string `json:"interface,omitempty"`
	// DropReason is the kernel's drop reason it is about (packet-drops:
	// QDISC_DROP, NEIGH_FAILED…).
	DropReason string `json:"drop_reason,omitempty"`
}

// Dropped is where packets a finding counts were dropped, as its rule
// read the evidence (the drop monitor's rows, a listener's drop
// counters).
type Dropped struct {
	// Reason is the kernel's drop reason: TCP_LISTEN_OVERFLOW for a
	// full accept queue, NETFILTER_DROP, QDISC_DROP…
	Reason string `json:"reason"`
	// Interface is the interface they were dropped on, when one.
	Interface string `json:"interface,omitempty"`
	// Listen is the listener whose full queue dropped them.
	Listen string `json:"listen,omitempty"`
	// Side is where they were dropped when it is not the finding's own
	// side: a client's retransmissions dropped at the server's queue.
	Side Side `json:"side,omitempty"`
	// Packets is how many the evidence counted dropped there: for a
	// listener's queue, the connections the server's listeners dropped
	// (TcpExtListenDrops).
	Packets uint64 `json:"packets"`
}

// Background is what the quiet seconds before a run's load showed of a
// finding's counters: they rose as fast without the load.
type Background struct {
	// Seconds is the quiet baseline's length.
	Seconds float64 `json:"seconds"`
	// LoadFailed: the load's connections failed with them all the same,
	// so the finding kept its severity; else it is background, and a
	// critical one became a warning.
	LoadFailed bool `json:"load_failed,omitempty"`
}

// Shown is the finding's evidence as a person reads it: its rule's
// items, then what the passes that look across findings said of it as
// data (its background, the throughput's shape), in words.
func (f Finding) Shown() []Item {
	out := f.Evidence
	if b := f.Background; b != nil {
		text := fmt.Sprintf("these counters rose as fast in the %.0f s before the load: background, not caused by it", b.Seconds)
		if b.LoadFailed {
			text = fmt.Sprintf("these counters rose as fast in the %.0f s before the load: something besides the load drives them, and the load's connections failed with them", b.Seconds)
		}
		out = append(slices.Clip(out), Item{Text: text, Source: "baseline", Window: true})
	}
	if s := f.Shape; s != nil {
		out = append(slices.Clip(out), Item{Text: s.Text, Source: "timeline", Window: true})
	}
	return out
}

// FixOf is a finding's fix as a person reads it, rendered from its
// actions: where its cause is a dependency at capacity
// (CauseAtCapacity), the advice of a bigger pool towards it
// (TagBiggerPool) says not to.
func FixOf(f Finding) []string {
	acts := f.Actions
	if f.CauseAtCapacity && len(f.About.Remotes) > 0 {
		acts = slices.Clone(acts)
		for i, a := range acts {
			if a.Tag == TagBiggerPool {
				acts[i] = Advise(fmt.Sprintf("not a bigger pool: %s is itself at capacity (%s: %s), and more connections would only queue there; fix that first", f.About.Remotes[0], f.CausedBy, f.CauseSubject))
			}
		}
	}
	return Render(acts)
}

// Hurts reports an active critical finding: what makes a command exit 1.
func (f Finding) Hurts() bool { return f.Status == Active && f.Severity == Critical }

// Item is one piece of evidence.
type Item struct {
	Text string `json:"text"`
	// Source names where it was read: a counter ("TcpExt.ListenOverflows"),
	// "sockdiag", "kmsg", "sysctl", "resolver", "process".
	Source string `json:"source"`
	// Window is true when the item was observed changing or happening
	// during the collection window, false for a static setting.
	Window bool `json:"window"`
}

// Sort orders findings by impact: active before latent, then by severity,
// then by ID, subject and side.
func Sort(fs []Finding) []Finding {
	slices.SortStableFunc(fs, Compare)
	return fs
}

// Compare orders two findings as Sort does.
func Compare(a, b Finding) int {
	return cmp.Or(cmp.Compare(statusRank(a.Status), statusRank(b.Status)),
		cmp.Compare(sevRank(a.Severity), sevRank(b.Severity)),
		cmp.Compare(a.ID, b.ID), cmp.Compare(a.Subject, b.Subject), cmp.Compare(a.Side, b.Side))
}

func statusRank(s Status) int {
	if s == Active {
		return 0
	}
	return 1
}

// MoreSevere reports whether severity a ranks above b.
func MoreSevere(a, b Severity) bool { return sevRank(a) < sevRank(b) }

func sevRank(s Severity) int {
	switch s {
	case Critical:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// JoinIDs lists finding IDs as text: "a, b".
func JoinIDs(ids []FindingID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, ", ")
}
