package rules

import "github.com/netdoctor/netdoctor/internal/report"

// NagleDelayedACK: Nagle's algorithm meets delayed ACKs.
const NagleDelayedACK report.FindingID = "nagle-delayed-ack"
