// Package labrun is `netdoctor lab run`: a scenario's lab built at its
// stages (package lab) and measured by netdoctor from the client's
// namespace, then fixed (the scenario's fix, or netdoctor's own plan
// verified in the same lab) and measured again. Each measurement is a
// typed Job (run.Options or capacity.Options and where the reports go)
// that a child process runs through the commands' own code. It is apart
// from package lab so that the environments can be built by tests of
// the packages a run itself is made of.
package labrun
