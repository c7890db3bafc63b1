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
// (../shared/docs/advice.md) marks outdated is ever proposed (Check).
package tune
