package journal

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var (
	errBusy = errors.New("busy")
	errGone = errors.New("gone")
)

// undoLog returns an undo that records each entry, failing those in fail.
func undoLog(done *[]string, fail map[string]error) func(string) error {
	return func(e string) error {
		*done = append(*done, e)
		return fail[e]
	}
}

func TestUndoOrder(t *testing.T) {
	entries := []string{"somaxconn", "nginx.conf", "listen"}
	for _, tt := range []struct {
		order Order
		want  []string
	}{
		{LatestFirst, []string{"listen", "nginx.conf", "somaxconn"}},
		{AsMade, []string{"somaxconn", "nginx.conf", "listen"}},
	} {
		var got []string
		finished := false
		err := Undo(entries, tt.order, undoLog(&got, nil), func() error { finished = true; return nil })
		if err != nil || !finished || !slices.Equal(got, tt.want) {
			t.Errorf("order %d: undid %v (err %v, done %v), want %v then done", tt.order, got, err, finished, tt.want)
		}
	}
	if !slices.Equal(entries, []string{"somaxconn", "nginx.conf", "listen"}) {
		t.Errorf("Undo reordered its argument: %v", entries)
	}
}

// TestUndoKeepsJournal: a failure in the middle neither stops the entries
// after it nor lets the journal go; when everything is undone the journal
// goes, and an error from that is returned.
func TestUndoKeepsJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lab.json")
	if err := Save(path, []string{"a", "b", "c", "d"}); err != nil {
		t.Fatal(err)
	}
	remove := func() error { return os.Remove(path) }
	var got []string
	err := Undo([]string{"a", "b", "c", "d"}, LatestFirst, undoLog(&got, map[string]error{"c": errBusy, "b": errGone}), remove)
	if !errors.Is(err, errBusy) || !errors.Is(err, errGone) {
		t.Errorf("Undo = %v, want both failures joined", err)
	}
	if !slices.Equal(got, []string{"d", "c", "b", "a"}) {
		t.Errorf("undid %v, want every entry, latest first", got)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("journal gone after a failed undo: %v", err)
	}
	got = nil
	if err := Undo([]string{"a", "b"}, LatestFirst, undoLog(&got, nil), remove); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal kept after everything was undone: %v", err)
	}
	if err := Undo([]string{"a"}, LatestFirst, undoLog(&got, nil), remove); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("done's error: %v, want it returned", err)
	}
}
