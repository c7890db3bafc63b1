package rules

import "github.com/netdoctor/netdoctor/internal/report"

// AppSlow: the application holds requests while the CPU idles.
const AppSlow report.FindingID = "app-slow"
