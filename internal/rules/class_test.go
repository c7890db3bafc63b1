package rules

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
)

// TestClasses: every finding ID a rule makes has a class, declared once
// beside its constant, and every class is a registered ID's; its severity
// range agrees with its docs row, and what it causes is registered too.
func TestClasses(t *testing.T) {
	ids := map[report.FindingID]bool{}
	for _, r := range Registry {
		for _, id := range r.IDs {
			ids[id] = true
			if _, ok := classes[id]; !ok {
				t.Errorf("%s: no class: declare one beside its constant with define(Class{ID: …})", id)
			}
		}
	}
	for _, c := range Classes() {
		if !ids[c.ID] {
			t.Errorf("class %s: no rule makes it", c.ID)
		}
		if c.Meaning == "" || c.Active == "" || c.LatentWhen == "" || c.Seed == "" || c.ReportedBy == "" {
			t.Errorf("%s: the class's summary row is incomplete: %+v", c.ID, c)
		}
		if crit := strings.Contains(c.Active, "critical"); crit != c.Critical {
			t.Errorf("%s: Critical %v, but its Active says %q", c.ID, c.Critical, c.Active)
		}
		if latent := c.LatentWhen != "—" && !strings.HasPrefix(c.LatentWhen, "none"); latent != c.Latent {
			t.Errorf("%s: Latent %v, but its LatentWhen says %q", c.ID, c.Latent, c.LatentWhen)
		}
		for _, s := range c.Consequences {
			if len(ofEffect(s.Effect)) == 0 {
				t.Errorf("%s: consequence %d is no class's effect (Is)", c.ID, s.Effect)
			}
		}
		if c.Resource != "" && resourceOwner(c.Resource) != c.ID {
			t.Errorf("%s: resource %s is also %s's", c.ID, c.Resource, resourceOwner(c.Resource))
		}
		for _, r := range c.DropReasons {
			if stray[r] {
				t.Errorf("%s: drop reason %s is a stray every host has", c.ID, r)
			}
			if o, ok := dropOwner(r); ok && o != c.ID && !c.OnItsLink {
				t.Errorf("%s: drop reason %s is also %s's", c.ID, r, o)
			}
		}
		if c.Waits && !c.Blocks {
			t.Errorf("%s: a server waiting on a dependency also makes its own clients wait (Blocks)", c.ID)
		}
	}
	tunables := map[string]bool{}
	for _, tu := range Tunables() {
		if tunables[tu.Name] {
			t.Errorf("%s is declared twice (Class.Tunables): once, in the class of the finding whose fix it is", tu.Name)
		}
		tunables[tu.Name] = true
	}
	if c := ClassOf("no-such-finding"); c.ID != "no-such-finding" || c.Critical || c.Errors || c.Delays || c.Fails != FailsNone || len(c.Consequences) > 0 {
		t.Error("ClassOf of an unknown ID is not the zero class")
	}
}

// TestContinuous: the agent's diagnosis (no load) makes the kernel
// rules' findings and the traced dependencies', not those that need a
// run.
func TestContinuous(t *testing.T) {
	for id, want := range map[report.FindingID]bool{
		AcceptQueueOverflow: true, CPUSaturated: true, RiskySysctl: true, DependencyPoolSaturated: true, DependencySlow: true,
		WorkerPoolExhausted: false, NagleDelayedACK: false, UnexplainedDistress: false, LoadGeneratorSaturated: false,
	} {
		if got := Continuous(id); got != want {
			t.Errorf("Continuous(%s) = %v, want %v", id, got, want)
		}
	}
}
