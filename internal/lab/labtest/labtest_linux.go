//go:build linux

// Package labtest builds lab environments for tests: skipped when not
// root or when a server is not installed, closed when the test ends.
package labtest

import (
	"errors"
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab"
)

// New creates a lab named id and closes it with t.Cleanup, reporting
// anything Close could not undo. It skips the test when not root.
func New(t testing.TB, id string) *lab.Env {
	t.Helper()
	e, err := lab.New(id)
	if errors.Is(err, lab.ErrNeedsRoot) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// Must fails the test on a lab error, and skips it when the error is a
// missing server binary or tool.
func Must(t testing.TB, err error) {
	t.Helper()
	var m lab.ErrMissing
	if errors.As(err, &m) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// NewLinked is New with a delay element between the client and the
// server (lab.NewLinked): l.Delay each way, at l.Rate.
func NewLinked(t testing.TB, id string, l lab.Link) *lab.Env {
	t.Helper()
	e, err := lab.NewLinked(id, l)
	if errors.Is(err, lab.ErrNeedsRoot) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}
