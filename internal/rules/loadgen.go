package rules

import "github.com/netdoctor/netdoctor/internal/report"

// LoadGeneratorSaturated: the load generator, not the server, may limit the numbers.
const LoadGeneratorSaturated report.FindingID = "load-generator-saturated"
