// Package tune is `netdoctor tune`: it turns a report's findings into an
// ordered change set (plan), applies it with a journal of every previous
// value written and fsync'd first (apply), and puts everything back from
// that journal (rollback).
//
// A plan carries kernel settings with their current and proposed values
// and the namespace they belong to, application configuration changes as
// unified diffs with the command that validates them and the signal that
// reloads the application, and listeners to re-listen where a raised
// net.core.somaxconn would otherwise wait for a restart. Every value is
// computed from the report's evidence; nothing the advice table
// (docs/advice.md) marks outdated is ever proposed (Check).
//
// Build (build.go) plans each finding with the fixer the table in
// fixes.go names for its ID, in the table's rank order. A fix lives in
// fix_<area>.go, the area of the rule that makes the finding in
// ../rules/<area>.go (fix_listen.go for rules/listen.go, and so on),
// with its tests in fix_<area>_test.go; a finding without a row takes
// the setting its own fix names (generic, in fix_sysctl.go). The fixes
// share the builder's plumbing: sysctl proposes a setting, current reads
// one for sizing, editNginx and editPool change a configuration file,
// and note says why a finding gets no automatic change.
//
// To fix a new rule's finding: write the fix as a builder method in
// tune/fix_<area>.go, with a test beside it that plans from the recorded
// seed 000 (helpers_test.go) and one that proposes nothing where that
// makes sense, and add one row to the table for its ID, ranked after the
// fixes whose plans it reads. Name findings in notes and reasons by their
// constants in rules, never by their text.
package tune
