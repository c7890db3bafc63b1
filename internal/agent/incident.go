package agent

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/safepath"
)

// incidents writes the window around each moment a finding turns active
// as a bundle `netdoctor diagnose` reads: what a saw-tooth at 3 a.m. left
// behind, for the morning. Findings that turn active while an incident
// is still gathering its "after" join it; a finding that starts one is
// not allowed to start another until a whole incident window has passed,
// so a flapping counter does not fill the disk. The directory is private
// to root (it holds the host's sockets and processes) and capped in
// size: the oldest incidents go first.
type incidents struct {
	dir           string
	before, after time.Duration
	maxBytes      int64
	log           *slog.Logger

	pending *incident
	last    map[string]time.Time // finding key: when it last started an incident
	// profile starts an on-CPU profile of the followed servers for an
	// incident; nil takes none.
	profile func() (stop func() *cpuprof.Profile, err error)
}

type incident struct {
	at, due time.Time
	ids     []report.FindingID
	meta    evidence.Incident
	// stopProfile ends the incident's profile, due at profileUntil.
	stopProfile  func() *cpuprof.Profile
	profileUntil time.Time
}

// incidentPrefix and incidentSuffix name the files the agent writes and
// rotates; nothing else in the directory is touched.
const (
	incidentPrefix = "incident-"
	incidentSuffix = ".bundle.json.gz"
)

func newIncidents(dir string, before, after time.Duration, maxBytes int64, log *slog.Logger, profile func() (func() *cpuprof.Profile, error)) (*incidents, error) {
	if err := safepath.PrivateDir(dir); err != nil {
		return nil, fmt.Errorf("incidents directory: %w", err)
	}
	return &incidents{dir: dir, before: before, after: after, maxBytes: maxBytes, log: log, last: map[string]time.Time{}, profile: profile}, nil
}

// trigger notes findings that turned active at now.
func (in *incidents) trigger(now time.Time, turned []report.Finding, during string) {
	var fresh []report.Finding
	for _, f := range turned {
		k := key(f)
		if t, ok := in.last[k]; ok && now.Sub(t) < in.before+in.after {
			continue
		}
		in.last[k] = now
		fresh = append(fresh, f)
	}
	if len(fresh) == 0 {
		return
	}
	if in.pending == nil {
		in.pending = &incident{at: now, due: now.Add(in.after), meta: evidence.Incident{Time: now, During: during}}
		if in.profile != nil {
			// What the servers did on CPU as it happened.
			stop, err := in.profile()
			if err != nil {
				in.pending.meta.ProfileError = err.Error()
			} else {
				in.pending.stopProfile, in.pending.profileUntil = stop, now.Add(min(incidentProfile, in.after))
			}
		}
	}
	for _, f := range fresh {
		in.pending.ids = append(in.pending.ids, f.ID)
		in.pending.meta.Findings = append(in.pending.meta.Findings, evidence.IncidentFinding{
			ID: string(f.ID), Severity: string(f.Severity), Subject: f.Subject, Title: f.Title, Time: now})
	}
	for k, t := range in.last {
		if now.Sub(t) >= in.before+in.after {
			delete(in.last, k)
		}
	}
}

// due writes the pending incident once its "after" has passed.
func (in *incidents) due(r *ring, host evidence.Host, deps *evidence.Traced, now time.Time) (int, error) {
	if p := in.pending; p != nil && p.stopProfile != nil && !now.Before(p.profileUntil) {
		p.endProfile()
	}
	if in.pending == nil || now.Before(in.pending.due) {
		return 0, nil
	}
	return in.flush(r, host, deps, now)
}

// flush writes the pending incident with the window it has, and deps,
// the last dependency trace if there is a recent one: what the servers
// waited on about then.
func (in *incidents) flush(r *ring, host evidence.Host, deps *evidence.Traced, now time.Time) (int, error) {
	p := in.pending
	if p == nil {
		return 0, nil
	}
	in.pending = nil
	p.endProfile()
	// What cannot be written (a NaN among the rates) is left out rather
	// than fail the whole incident.
	if _, err := json.Marshal(deps); deps != nil && err == nil {
		p.meta.Dependencies = deps
	}
	snaps, err := r.between(p.at.Add(-in.before), now)
	if err != nil && len(snaps) == 0 {
		return 0, err
	}
	b := &evidence.Bundle{Version: evidence.BundleVersion, Host: host, Snapshots: snaps, Incident: &p.meta}
	if len(snaps) > 0 {
		b.Start = snaps[0].Time
	}
	path, err := in.write(b, p)
	if err != nil {
		return 0, err
	}
	in.log.Info("incident written", "path", path, "findings", len(p.ids), "snapshots", len(snaps))
	return 1, in.rotate(path)
}

// endProfile stops the incident's profile, if it runs, and keeps it.
func (p *incident) endProfile() {
	if p.stopProfile == nil {
		return
	}
	prof := p.stopProfile()
	p.stopProfile = nil
	if _, err := json.Marshal(prof); err != nil {
		p.meta.ProfileError = err.Error()
		return
	}
	p.meta.Profile = prof
}

// write creates the incident's file: a new name in the private
// directory, never an existing file or a symlink. The bundle is written
// to a temporary file first and linked under its name once complete, so
// that whoever lists the directory (diagnose, a shipper, a test) never
// reads half an incident.
func (in *incidents) write(b *evidence.Bundle, p *incident) (string, error) {
	f, err := os.CreateTemp(in.dir, ".incident-*.tmp") // O_EXCL, 0600
	if err != nil {
		return "", fmt.Errorf("incident: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	zw := gzip.NewWriter(f)
	err = json.NewEncoder(zw).Encode(evidence.NamespaceFile(b))
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("incident %s: %w", tmp, err)
	}
	name := incidentPrefix + p.at.UTC().Format("20060102T150405Z") + "-" + string(p.ids[0]) + incidentSuffix
	path := filepath.Join(in.dir, name)
	// A link never replaces an existing name.
	err = os.Link(tmp, path)
	for i := 2; errors.Is(err, fs.ErrExist) && i < 100; i++ {
		path = filepath.Join(in.dir, strings.TrimSuffix(name, incidentSuffix)+fmt.Sprintf("-%d", i)+incidentSuffix)
		err = os.Link(tmp, path)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		// A filesystem without hard links: the private directory has no
		// other writer, so a name free now is free to rename onto.
		if _, lerr := os.Lstat(path); errors.Is(lerr, fs.ErrNotExist) {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		return "", fmt.Errorf("incident: %w", err)
	}
	return path, nil
}

// rotate removes the oldest incidents until those left fit maxBytes; the
// one just written is always kept.
func (in *incidents) rotate(keep string) error {
	ents, err := os.ReadDir(in.dir)
	if err != nil {
		return err
	}
	type file struct {
		path string
		size int64
	}
	var files []file
	var total int64
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), incidentPrefix) || !strings.HasSuffix(e.Name(), incidentSuffix) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, file{filepath.Join(in.dir, e.Name()), fi.Size()})
		total += fi.Size()
	}
	// The names start with the UTC time: their order is the incidents'.
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.path, b.path) })
	for _, f := range files {
		if total <= in.maxBytes {
			break
		}
		if f.path == keep {
			continue
		}
		if err := os.Remove(f.path); err != nil {
			return err
		}
		in.log.Info("incident rotated out", "path", f.path)
		total -= f.size
	}
	return nil
}
