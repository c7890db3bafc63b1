package rules

import "github.com/netdoctor/netdoctor/internal/report"

// UpstreamConnectionChurn: a server opens a new connection per request to its upstream.
const UpstreamConnectionChurn report.FindingID = "upstream-connection-churn"
