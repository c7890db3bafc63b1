package rules

import (
	"cmp"
	"fmt"
	"slices"

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
	Name string
	// Order is where it runs among the rules of its stage (register):
	// lowest first. It is also where its findings' sections come in
	// docs/findings.md, and what "checked and found clean" lists first.
	Order int
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
	// (Input.Traced), so the agent can make its findings.
	Traced bool
	// Profiled: the rule also judges check's on-CPU profile of the
	// servers behind its listeners (Input.Profile), traced or not. The agent
	// profiles only on an incident, so its diagnosis never makes these.
	Profiled bool
	// Watches are the counters the rule judges: one that rose in a
	// run's window without a finding is reported as such, never as
	// checked and found clean.
	Watches []string
	// Looks says whether a snapshot holds what the rule reads (nil:
	// always): a rule that had nothing to read checked nothing.
	Looks func(*evidence.Snapshot) bool
	// LooksIn says whether a run holds what the rule reads (nil:
	// always): the dependencies when a server's connections were
	// traced, the CPU rules when a server's threads were accounted.
	LooksIn func(*evidence.Run) bool
	// Doc is the one section of docs/findings.md for all its findings,
	// under a heading of their IDs, when they share one (name lookups);
	// else each class has its own (Class.Doc). Markdown, with ´ for a
	// backtick.
	Doc string
}

// Registry is every rule, in the order they run: by stage (the rules
// that read a namespace, then PerRun, then Symptom), then by Order. Each
// rule registers itself in its own file (register); the order never
// depends on which file the compiler reads first.
var Registry []Rule

// register adds a rule to the Registry, beside the declaration of the
// IDs it makes:
//
//	var _ = register(Rule{Name: "neighbour", Order: 160, Scope: PerSide, …})
//
// Two rules with one name or one Order are a programming error.
func register(r Rule) Rule {
	for _, o := range Registry {
		if o.Name == r.Name || o.Order == r.Order {
			panic(fmt.Sprintf("rules: rules %q and %q share a name or an order (%d)", o.Name, r.Name, r.Order))
		}
	}
	i, _ := slices.BinarySearchFunc(Registry, r, compareRules)
	Registry = slices.Insert(Registry, i, r)
	return r
}

// compareRules orders rules as they run: those that read a namespace
// (PerSide and PerHost, which run together on each side), then PerRun,
// then Symptom; within a stage, by Order.
func compareRules(a, b Rule) int {
	return cmp.Or(cmp.Compare(stage(a.Scope), stage(b.Scope)), cmp.Compare(a.Order, b.Order))
}

// stage is when rules of a scope run.
func stage(s Scope) int {
	switch s {
	case PerRun:
		return 1
	case Symptom:
		return 2
	}
	return 0
}
