package journal

import (
	"errors"
	"slices"
)

// Order is the order in which Undo takes a journal's entries.
type Order int

const (
	// LatestFirst undoes the last change first, so that a value changed
	// twice ends at its value from before the first change.
	LatestFirst Order = iota
	// AsMade undoes the changes in the order they were made, for
	// journals whose earlier entries bound what later ones do: tune
	// restores a kernel limit before the application whose reload, or
	// listener, that limit caps.
	AsMade
)

// Undo undoes every entry with undo, in order. Each entry is attempted
// even when another failed, and the failures are joined. Only when every
// entry was undone does it call done, which removes the journal or marks
// it undone, and return done's error; otherwise the journal is left as it
// is, for the next attempt to finish.
func Undo[E any](entries []E, order Order, undo func(E) error, done func() error) error {
	todo := slices.Clone(entries)
	if order == LatestFirst {
		slices.Reverse(todo)
	}
	var errs []error
	for _, e := range todo {
		if err := undo(e); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return done()
}
