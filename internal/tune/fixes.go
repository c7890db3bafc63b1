package tune

import (
	"fmt"

	"github.com/netdoctor/netdoctor/internal/report"
)

// fixer plans the fix of one kind of finding.
type fixer struct {
	// rank orders the findings before any is planned, lowest first, the
	// report's order otherwise; rankRest, the zero value, is most fixes'.
	rank int
	// plan adds the fix's changes (or notes) to the plan.
	plan func(*builder, report.Finding) error
}

// Ranks, in the order the findings are planned. Connection reuse comes
// first because what it keeps open sizes other fixes: conntrack's table
// does not count the connections the plan keeps (flows), and a php-fpm
// pool must cover every connection nginx keeps, each pinning a worker
// (sizePool says so only once reuse has planned the keepalive pool).
// The worker pool comes next. No later fix reads what it plans: the rank
// only orders the plan, a pool file's change giving its pm.max_children
// before the listen.backlog an accept queue adds to the same file.
const (
	rankReuse = -2
	rankPool  = -1
	rankRest  = 0
)

// fixes are the findings with a fix of their own, by ID: each plan
// registers itself beside its function in fix_<area>.go (planFix), as its
// rule lives in rules/<area>.go. A finding without one takes the setting
// its own fix names (generic).
var fixes = map[report.FindingID]fixer{}

// planFix registers the plan of a finding's fix:
//
//	var _ = planFix(rules.NeighbourTableOverflow, rankRest, (*builder).neighbour)
//
// Two plans for one finding are a programming error.
func planFix(id report.FindingID, rank int, plan func(*builder, report.Finding) error) fixer {
	if _, dup := fixes[id]; dup {
		panic(fmt.Sprintf("tune: finding %s has two fixes", id))
	}
	fixes[id] = fixer{rank: rank, plan: plan}
	return fixes[id]
}

// fixFor is the fixer of a finding ID: its row, else the generic one.
func fixFor(id report.FindingID) fixer {
	if fx, ok := fixes[id]; ok {
		return fx
	}
	return fixer{rank: rankRest, plan: (*builder).generic}
}
