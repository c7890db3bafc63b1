package rules

import "github.com/netdoctor/netdoctor/internal/report"

// WorkerPoolExhausted: every worker of an application pool was busy while requests queued.
const WorkerPoolExhausted report.FindingID = "worker-pool-exhausted"
