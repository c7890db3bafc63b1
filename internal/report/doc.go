// Package report is netdoctor's output contract and its renderers. It
// holds the types every report is made of (Finding, Item, the typed
// severities, statuses and sides), the reports of each command (Report
// for check and diagnose, Run, Load, Verify), one reader for all of them
// (Read), and every way they are written: the terminal text (verdict
// first, then evidence and fixes), wrk's layout for a load, the
// self-contained HTML page, and two runs compared. The JSON is documented
// in docs/report.md. It knows no rule: the rules make findings, report
// only carries and shows them.
package report
