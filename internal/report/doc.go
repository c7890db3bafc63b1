// Package report renders findings: a terminal report (verdict first, then
// evidence and fixes) and the JSON contract documented in docs/report.md.
package report
