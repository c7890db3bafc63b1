package tune

import (
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
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

// fixes maps each finding ID with a fix of its own to it; each plan
// lives in fix_<area>.go, as its rule in rules/<area>.go. A finding
// without a row takes the setting its own fix names (generic).
var fixes = map[report.FindingID]fixer{
	rules.UpstreamConnectionChurn: {rank: rankReuse, plan: (*builder).reuse},      // fix_churn.go
	rules.WorkerPoolExhausted:     {rank: rankPool, plan: (*builder).workers},     // fix_workerpool.go
	rules.AcceptQueueOverflow:     {rank: rankRest, plan: (*builder).backlog},     // fix_listen.go
	rules.SynQueueOverflow:        {rank: rankRest, plan: (*builder).synQueue},    // fix_listen.go
	rules.EphemeralPortExhaustion: {rank: rankRest, plan: (*builder).ports},       // fix_ports.go
	rules.ConntrackTableFull:      {rank: rankRest, plan: (*builder).conntrack},   // fix_conntrack.go
	rules.NagleDelayedACK:         {rank: rankRest, plan: (*builder).nodelay},     // fix_nagle.go
	rules.RiskySysctl:             {rank: rankRest, plan: (*builder).riskySysctl}, // fix_sysctl.go
	rules.TimewaitBucketOverflow:  {rank: rankRest, plan: (*builder).twBuckets},   // fix_sysctl.go
	rules.NeighbourTableOverflow:  {rank: rankRest, plan: (*builder).neighbour},   // fix_neighbour.go
}

// fixFor is the fixer of a finding ID: its row, else the generic one.
func fixFor(id report.FindingID) fixer {
	if fx, ok := fixes[id]; ok {
		return fx
	}
	return fixer{rank: rankRest, plan: (*builder).generic}
}
