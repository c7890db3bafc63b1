package tune

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/journal"
	"github.com/netdoctor/netdoctor/internal/safepath"
)

// JournalDir holds apply's journals. It must outlive a reboot: a
// persisted file or a configuration file keeps the change.
// NETDOCTOR_JOURNAL_DIR moves it (tests keep theirs apart).
var JournalDir = journalDir()

func journalDir() string {
	if d := os.Getenv("NETDOCTOR_JOURNAL_DIR"); d != "" {
		return d
	}
	return "/var/lib/netdoctor/tune"
}

// Journal states.
const (
	StateApplying   = "applying"    // written before the first change; a crash leaves it so
	StateApplied    = "applied"     // every change made
	StateRolledBack = "rolled-back" // every previous value restored
)

// Journal records every value apply is about to change, written and
// fsync'd before the first change, so that rollback can restore them
// after a crash at any point. Its JSON is version 1's: rollback reads
// journals written before a reboot, by an older netdoctor.
type Journal struct {
	Version int       `json:"version"`
	Path    string    `json:"-"`
	Plan    string    `json:"plan"`
	Started time.Time `json:"started"`
	// Owner is the applying process ("pid", "start_time"): a journal
	// left "applying" by a live one means an apply still running.
	journal.Owner
	State   string  `json:"state"`
	Entries []Entry `json:"entries"`
}

// Entry is one change's previous state. Done says it was made (a crash
// between the change and the journal's update leaves it false, and
// rollback restores it anyway: restoring an unchanged value is a no-op).
type Entry struct {
	Key    string     `json:"key"`
	Title  string     `json:"title"`
	Sysctl *SysctlWas `json:"sysctl,omitempty"`
	File   *FileWas   `json:"file,omitempty"`
	Listen *ListenWas `json:"listen,omitempty"`
	Done   bool       `json:"done"`
}

// SysctlWas is a setting's previous value.
type SysctlWas struct {
	Name string `json:"name"`
	Old  string `json:"old"`
	New  string `json:"new"`
	// Path and Inode name the namespace written (Path "" for the applying
	// process's own, whose inode Inode is).
	// A Global setting's namespace is found again at rollback (the path
	// apply used may belong to a process that has exited).
	Path   string `json:"netns_path,omitempty"`
	Inode  uint64 `json:"netns_inode"`
	Global bool   `json:"global,omitempty"`
	Scope  string `json:"scope"`
}

// FileWas is a file's previous content; Existed false means rollback
// removes it.
type FileWas struct {
	Path    string   `json:"path"`
	Existed bool     `json:"existed"`
	Mode    uint32   `json:"mode"`
	UID     int      `json:"uid"`
	GID     int      `json:"gid"`
	Old     []byte   `json:"old"`
	OldSHA  string   `json:"old_sha256"`
	NewSHA  string   `json:"new_sha256"`
	App     string   `json:"app,omitempty"`
	Check   []string `json:"validate,omitempty"`
	Reload  *Reload  `json:"reload,omitempty"`
}

// ListenWas is a listening socket's previous effective backlog.
type ListenWas struct {
	Addr  string `json:"addr"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start_time"`
	Old   int    `json:"old"`
	New   int    `json:"new"`
}

// save writes the journal durably (journal.Save) before the change it
// records is made.
func (j *Journal) save() error {
	if err := journal.Save(j.Path, j); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// newJournal creates the journal's file name: time first, so that names
// sort by age.
func newJournal(plan string) (*Journal, error) {
	if err := safepath.PrivateDir(JournalDir); err != nil {
		return nil, fmt.Errorf("journal directory: %w", err)
	}
	now := time.Now().UTC()
	name := fmt.Sprintf("%s-%d.json", now.Format("20060102T150405.000000000Z"), os.Getpid())
	return &Journal{Version: Version, Path: filepath.Join(JournalDir, name), Plan: plan, Started: now,
		Owner: journal.Self(), State: StateApplying}, nil
}

// ReadJournal reads a journal file: one root or the caller wrote
// (safepath.CheckOwned), since rollback writes back the files it holds
// and runs their validation.
func ReadJournal(path string) (*Journal, error) {
	if err := safepath.CheckOwned(path); err != nil {
		return nil, err
	}
	var j Journal
	if err := journal.Read(path, &j); err != nil {
		return nil, err
	}
	if j.Version != Version {
		return nil, fmt.Errorf("%s is not a netdoctor journal (version %d)", path, j.Version)
	}
	j.Path = path
	return &j, nil
}

// Open lists the journals not rolled back, newest first.
func Open() ([]*Journal, error) {
	paths, err := journal.List(JournalDir)
	if err != nil {
		return nil, err
	}
	var out []*Journal
	for _, p := range paths {
		j, err := ReadJournal(p)
		if err != nil {
			return nil, err
		}
		if j.State != StateRolledBack {
			out = append(out, j)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// Forget removes a rolled-back journal that only one command needed (a
// verify run's), and the journal directory when that leaves it empty.
func Forget(j *Journal) error {
	if j.State != StateRolledBack {
		return fmt.Errorf("%s is %s: keep it for rollback", j.Path, j.State)
	}
	if err := os.Remove(j.Path); err != nil {
		return err
	}
	if os.Remove(JournalDir) == nil && filepath.Base(filepath.Dir(JournalDir)) == "netdoctor" {
		os.Remove(filepath.Dir(JournalDir))
	}
	return nil
}

// persistContent is PersistFile with settings set: lines for other keys
// kept as they were, earlier lines for these keys dropped, these added in
// name order.
func persistContent(old []byte, existed bool, settings []Sysctl) []byte {
	set := map[string]string{}
	for _, s := range settings {
		set[s.Name] = s.Proposed
	}
	var b bytes.Buffer
	if !existed {
		b.WriteString("# Written by netdoctor tune apply --persist; `netdoctor tune rollback` restores the previous state.\n")
	}
	for _, l := range strings.SplitAfter(string(old), "\n") {
		k, _, ok := strings.Cut(l, "=")
		if _, ours := set[strings.TrimSpace(k)]; ok && ours {
			continue
		}
		b.WriteString(l)
	}
	if b.Len() > 0 && !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
		b.WriteString("\n")
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%s = %s\n", n, set[n])
	}
	return b.Bytes()
}
