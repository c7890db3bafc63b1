// Package journal is the crash-safe undo log that tune apply and the lab
// share: before a change to the machine is made, the previous state is
// written durably to a journal file, so that whatever kills the process,
// a later run (tune rollback, lab clean) can put the machine back.
//
// A journal names its Owner, the process that makes the changes, by PID
// and start time, so that a journal whose owner died is told from a live
// one even once the PID is reused. Save writes a journal before the
// change it records; Undo walks its entries back, trying every one, and
// keeps the journal when one could not be undone. The entries themselves
// (sysctls, files, listeners; namespaces, directories, globals) belong to
// the packages that write them.
package journal
