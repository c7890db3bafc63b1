package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/report"
)

// Class is what a finding ID means, declared once, beside the ID's
// constant (define): how bad it can be, what its fault does to a run's
// requests, what it causes and what it owns of the evidence, the
// settings tune may set for it, how long an alert on it waits, and its
// row and section in docs/findings.md. Everything that acts on a
// finding's meaning reads its class, never a list of IDs: the ranking of
// causes (rank), the distress no finding explains (distress), causes and
// their symptoms (relate), the share of failed requests a cause accounts
// for (explain), the baseline, drops, headroom, app-slow, capacity,
// tune, the alerts (internal/alerts) and the docs (internal/gen).
type Class struct {
	// ID is the finding's ID; its constant is declared next to the class.
	ID report.FindingID

	// Critical: the rule can report it active and critical; otherwise an
	// active finding is at most a warning.
	Critical bool
	// Latent: the rule also reports it latent, a risk at scale.
	Latent bool

	// What its fault does to a run's requests while it is active:
	//
	// Errors: it fails requests (refused, reset, timed out, answered
	// 5xx), so it explains a load's errors, 5xx, stalls and collapses.
	Errors bool
	// Delays: it makes requests slow, so it explains a slow tail, and
	// ranks first when the run was slow.
	Delays bool
	// Holds: it leaves a server holding connections its clients closed
	// (CLOSE_WAIT): its workers are busy elsewhere.
	Holds bool
	// Latency: it names the cause of a run's slow median by itself, so
	// app-slow (time held that no finding names) is not made beside it.
	Latency bool
	// Fails is the run's failed requests it accounts for, counted
	// (explain).
	Fails Failure
	// OnlyWhen, when set, is the one severity at which it explains
	// anything: a SYN queue that overflowed into SYN cookies (a warning)
	// lost no connection and delayed none.
	OnlyWhen report.Severity
	// Drops: its counters count connections or packets the kernel
	// dropped, so a load whose connections failed with them is hurt by
	// it even when they rose as fast before the load (baseline).
	Drops bool

	// How it relates to others:
	//
	// Consequences are the symptoms it causes, by their kind (Effect),
	// never by another rule's ID: relate lists an active finding that
	// Is one of them after it, as caused by it.
	Consequences []Consequence
	// Is is the kind of symptom it is, by which a cause names it in its
	// Consequences (a full pool Is WorkersFull, what a stalled lookup
	// causes).
	Is Effect
	// Blocks: a finding about one server that makes its clients wait on
	// it (its pool full, its queue overflowing, its own wait on a
	// dependency, time of its own): relate names it the cause of the
	// dependency findings of the servers that wait on it.
	Blocks bool
	// Waits: a finding about a server waiting on a dependency
	// (About.Remotes), whose cause is the dependency's own finding that
	// Blocks, when there is one.
	Waits bool
	// AtCapacity: the server has no room for more requests at once (its
	// workers all taken, its listen queue full, its own pool to what it
	// depends on saturated): a bigger pool of connections to it would
	// only queue there.
	AtCapacity bool

	// What it owns of the evidence other rules read too:
	//
	// DropReasons are the kernel's drop reasons (the drop monitor's,
	// include/net/dropreason-core.h) whose drops are its evidence:
	// packet-drops leaves them to it, and where a finding's packets died
	// of one (Finding.Dropped), relate names it their cause.
	DropReasons []string
	// OnItsLink: it owns its DropReasons only on the interface its
	// finding names (About.Interface: a saturated link's qdisc); on any
	// other they are packet-drops'.
	OnItsLink bool
	// DropsElsewhere: it also names its DropReasons' drops in the host's
	// other namespaces, where a run's packets die on the way; packet-drops
	// leaves those to it too.
	DropsElsewhere bool
	// ListenerDrops: its finding about a listener (About.Listen) rests on
	// that listener's own drop counter where the kernel keeps one, so the
	// quiet baseline judges it by that listener's drops, not the
	// namespace's counters, which are every listener's.
	ListenerDrops bool
	// Resource is the resource whose headroom it reports at the limit
	// (Headroom: worker-pool, accept-queue, cpu…), if any.
	Resource string
	// PathFault: its fault is on the path between the hosts (packets
	// lost on the way, a path MTU, a link's bandwidth), not in a host's
	// settings or its servers.
	PathFault bool
	// Residual: it is made only for what no other finding explains
	// (unexplained-distress), so what reads a diagnosis names it last.
	Residual bool
	// Generator: it is about netdoctor's own load generator, not the
	// service under load.
	Generator bool
	// Tunables are the kernel settings tune may set for it, each with
	// the values it may propose; apply writes nothing else, whatever a
	// plan file says (internal/tune). Each setting is declared once, by
	// the finding whose fix it is; another finding's fix may name it too.
	Tunables []Tunable

	// Hold is how long its alert waits before firing; zero for its
	// severity's (internal/alerts: ForCritical, ForWarning). Findings
	// whose counters rise now and then on busy, healthy hosts hold
	// longer.
	Hold time.Duration

	// Its row in docs/findings.md's summary, word for word:
	//
	// Meaning says what it is to someone who sees only the ID (an
	// alert, a dashboard, a metric's label).
	Meaning string
	// Active and LatentWhen say when it is active and when latent, with
	// the severity; LatentWhen is "none" or "—" without a latent form.
	Active, LatentWhen string
	// Seed names the seed cases that show it, and ReportedBy the
	// commands that report it.
	Seed, ReportedBy string

	// Doc is its section of docs/findings.md, under a heading of its ID:
	// exactly what its rule reads and the thresholds it applies, in
	// Markdown, with ´ for a backtick (a Go raw string cannot hold one).
	// A rule whose findings share one section says it in Rule.Doc
	// instead. go generate ./internal/gen writes the docs from it.
	Doc string
}

// Tunable is a kernel setting tune may set, and the values it may
// propose: one of Values when set, else "LOW HIGH" when Range, else an
// integer in [Min, Max].
type Tunable struct {
	Name     string
	Values   []string
	Range    bool
	Min, Max int64
	// Why says where the bounds come from, for the error and the docs.
	Why string
}

// Tunables lists the settings tune may set, every class's, in the
// registry's order.
func Tunables() []Tunable {
	var out []Tunable
	for _, r := range Registry {
		for _, id := range r.IDs {
			out = append(out, ClassOf(id).Tunables...)
		}
	}
	return out
}

// Failure is the kind of failed requests a finding accounts for.
type Failure int

// Failures a finding can account for (Class.Fails).
const (
	FailsNone Failure = iota
	// FailsConnections: the kernel drops or refuses the clients'
	// connections: connect errors, resets, timeouts.
	FailsConnections
	// FailsAtFront: the listener it names drops connections, which are
	// the clients' own only at the run's front port; a queue behind the
	// front fails no client connection itself (one that names no
	// listener counts as the front).
	FailsAtFront
	// FailsOutgoing: the connects its side makes fail: the client's are
	// the load's connection errors, a server's are its proxy's 5xx.
	FailsOutgoing
	// Fails5xx: the proxy could not get an answer upstream: 5xx.
	Fails5xx
)

// Consequence is a symptom that a finding causes when both are active.
type Consequence struct {
	// Effect is the kind of symptom: any finding whose class Is it.
	Effect Effect
	// At says which symptom is the cause's own.
	At Match
}

// Effect is a kind of symptom, named for what happens rather than for
// the finding that reports it, so that a cause says what it does
// (Consequences) in its own file, and the finding that is that symptom
// says so in its own (Is).
type Effect int

// Effects.
const (
	NoEffect Effect = iota
	// WorkersFull: a server's workers are all taken; requests wait for
	// one.
	WorkersFull
	// TimeHeld: the application holds requests while its CPUs idle, for
	// no cause another finding names.
	TimeHeld
	// AcceptQueueFull: a listener's accept queue overflows.
	AcceptQueueFull
	// PortsExhausted: the local ports towards a destination run out.
	PortsExhausted
	// TimeWaitFull: the TIME_WAIT table overflows.
	TimeWaitFull
	// LegWait: a server's requests wait on one of its dependencies (its
	// pool of connections to it, its answers).
	LegWait
)

// Match says which consequence a cause accounts for.
type Match int

const (
	// Anywhere: any active finding of the consequence's ID.
	Anywhere Match = iota
	// OwnListener: one about the listener the cause is about (a pool's
	// own socket overflowing), never another's.
	OwnListener
	// OwnRemotes: one towards the cause's destinations, or naming none.
	OwnRemotes
	// OwnLeg: one about the same server's wait on the same destinations
	// (a stall on a leg, the leg's pool), both naming them.
	OwnLeg
)

// classes holds every class, by ID (define).
var classes = map[report.FindingID]*Class{}

// define declares a finding ID's class, once, beside its constant:
//
//	const AcceptQueueOverflow report.FindingID = "accept-queue-overflow"
//	var _ = define(Class{ID: AcceptQueueOverflow, Critical: true, …})
//
// TestClasses fails for a registered ID without one.
func define(c Class) *Class {
	if _, dup := classes[c.ID]; dup {
		panic(fmt.Sprintf("rules: finding %s has two classes", c.ID))
	}
	classes[c.ID] = &c
	return &c
}

// ClassOf is a finding ID's class; the zero Class (nothing known) for an
// ID no rule declares, such as one read from another version's report.
func ClassOf(id report.FindingID) Class {
	if c, ok := classes[id]; ok {
		return *c
	}
	return Class{ID: id}
}

// Classes lists every finding ID's class, by ID.
func Classes() []Class {
	out := make([]Class, 0, len(classes))
	for _, c := range classes {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Class) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// counts reports whether a finding explains anything at its severity
// (OnlyWhen).
func (c Class) counts(f report.Finding) bool {
	return c.OnlyWhen == "" || f.Severity == c.OnlyWhen
}

// ofEffect lists the IDs whose class Is e, by ID: the findings a cause
// names by that effect.
func ofEffect(e Effect) []report.FindingID {
	var out []report.FindingID
	for _, c := range Classes() {
		if e != NoEffect && c.Is == e {
			out = append(out, c.ID)
		}
	}
	return out
}

// causesOf lists the IDs whose class names id's kind of symptom among
// its Consequences, by ID: what a finding can be the consequence of.
func causesOf(id report.FindingID) []report.FindingID {
	is := ClassOf(id).Is
	var out []report.FindingID
	for _, c := range Classes() {
		for _, s := range c.Consequences {
			if is != NoEffect && s.Effect == is {
				out = append(out, c.ID)
				break
			}
		}
	}
	return out
}

// dropOwner is the ID whose class owns a drop reason everywhere
// (DropReasons, not OnItsLink), and whether one does.
func dropOwner(reason string) (report.FindingID, bool) {
	for _, c := range Classes() {
		if !c.OnItsLink && slices.Contains(c.DropReasons, reason) {
			return c.ID, true
		}
	}
	return "", false
}

// resourceOwner is the ID whose class reports a resource's headroom at
// the limit (Resource).
func resourceOwner(resource string) report.FindingID {
	for _, c := range Classes() {
		if c.Resource == resource {
			return c.ID
		}
	}
	return ""
}

// A DocSection is a section of docs/findings.md: a heading of the IDs
// it documents and its text, in Markdown.
type DocSection struct {
	Heading string
	IDs     []report.FindingID
	Text    string
}

// DocSections are the sections of docs/findings.md for the rules' findings,
// in the registry's order: one per rule that documents its findings
// together (Rule.Doc), else one per finding (Class.Doc).
func DocSections() []DocSection {
	var out []DocSection
	for _, r := range Registry {
		if r.Doc != "" {
			out = append(out, DocSection{Heading: report.JoinIDs(r.IDs), IDs: r.IDs, Text: markdown(r.Doc)})
			continue
		}
		for _, id := range r.IDs {
			out = append(out, DocSection{Heading: string(id), IDs: []report.FindingID{id}, Text: markdown(ClassOf(id).Doc)})
		}
	}
	return out
}

// Section is the heading of the section of docs/findings.md that
// documents a finding, "" for an ID no rule makes.
func Section(id report.FindingID) string {
	for _, s := range DocSections() {
		if slices.Contains(s.IDs, id) {
			return s.Heading
		}
	}
	return ""
}

// markdown is a Doc as Markdown: its ´ are backticks.
func markdown(doc string) string { return strings.ReplaceAll(doc, "´", "`") }

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
