// Package tunetest records what tune.Build reads of a live host (its
// settings, configuration files, processes and memory) and replays it,
// so that plans computed on a lab can be computed again in a unit test
// and compared with a golden file.
package tunetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/tune"
)

// Host is a recording: every answer a tune.Host gave.
type Host struct {
	Sysctls []Sysctl          `json:"sysctls"`
	Files   map[string]Answer `json:"files"`
	Procs   map[int]ProcAns   `json:"procs"`
	Mem     uint64            `json:"mem_available"`
}

// Sysctl is one setting read in one scope.
type Sysctl struct {
	Scope tune.Scope `json:"scope"`
	Name  string     `json:"name"`
	Answer
}

// Answer is a value or the error that came instead.
type Answer struct {
	Value string `json:"value,omitempty"`
	// Err is "notexist" (fs.ErrNotExist), "nons" (netns.ErrNotFound)
	// or another error's text.
	Err string `json:"err,omitempty"`
}

// ProcAns is one process read.
type ProcAns struct {
	Proc tune.Proc `json:"proc"`
	Err  string    `json:"err,omitempty"`
}

func answer(v string, err error) Answer {
	switch {
	case err == nil:
		return Answer{Value: v}
	case errors.Is(err, netns.ErrNotFound):
		return Answer{Err: "nons"}
	case errors.Is(err, fs.ErrNotExist):
		return Answer{Err: "notexist"}
	}
	return Answer{Err: err.Error()}
}

func (a Answer) result() (string, error) {
	switch a.Err {
	case "":
		return a.Value, nil
	case "nons":
		return "", fmt.Errorf("recorded: %w", netns.ErrNotFound)
	case "notexist":
		return "", fmt.Errorf("recorded: %w", fs.ErrNotExist)
	}
	return "", errors.New(a.Err)
}

// Recorder is a tune.Host that asks another and records the answers.
type Recorder struct {
	Of tune.Host
	mu sync.Mutex
	H  Host
}

// Sysctl implements tune.Host.
func (r *Recorder) Sysctl(s tune.Scope, name string) (string, error) {
	v, err := r.Of.Sysctl(s, name)
	r.mu.Lock()
	r.H.Sysctls = append(r.H.Sysctls, Sysctl{Scope: s, Name: name, Answer: answer(v, err)})
	r.mu.Unlock()
	return v, err
}

// ReadFile implements tune.Host.
func (r *Recorder) ReadFile(path string) ([]byte, error) {
	b, err := r.Of.ReadFile(path)
	r.mu.Lock()
	if r.H.Files == nil {
		r.H.Files = map[string]Answer{}
	}
	r.H.Files[path] = answer(string(b), err)
	r.mu.Unlock()
	return b, err
}

// Process implements tune.Host.
func (r *Recorder) Process(pid int) (tune.Proc, error) {
	p, err := r.Of.Process(pid)
	r.mu.Lock()
	if r.H.Procs == nil {
		r.H.Procs = map[int]ProcAns{}
	}
	a := ProcAns{Proc: p}
	if err != nil {
		a.Err = answer("", err).Err
	}
	r.H.Procs[pid] = a
	r.mu.Unlock()
	return p, err
}

// MemAvailable implements tune.Host.
func (r *Recorder) MemAvailable() uint64 {
	m := r.Of.MemAvailable()
	r.H.Mem = m
	return m
}

// Save writes the recording.
func (r *Recorder) Save(path string) error {
	b, err := json.MarshalIndent(&r.H, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Load reads a recording to replay.
func Load(path string) (*Host, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h Host
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &h, nil
}

// Sysctl implements tune.Host: the recorded answer, or "not here" for a
// question the recording never saw.
func (h *Host) Sysctl(s tune.Scope, name string) (string, error) {
	for _, r := range h.Sysctls {
		if r.Scope == s && r.Name == name {
			return r.result()
		}
	}
	return "", fmt.Errorf("%s not recorded: %w", name, fs.ErrNotExist)
}

// ReadFile implements tune.Host.
func (h *Host) ReadFile(path string) ([]byte, error) {
	a, ok := h.Files[path]
	if !ok {
		return nil, fmt.Errorf("%s not recorded: %w", path, fs.ErrNotExist)
	}
	v, err := a.result()
	return []byte(v), err
}

// Process implements tune.Host.
func (h *Host) Process(pid int) (tune.Proc, error) {
	a, ok := h.Procs[pid]
	if !ok {
		return tune.Proc{}, fmt.Errorf("pid %d not recorded: %w", pid, fs.ErrNotExist)
	}
	if a.Err != "" {
		_, err := Answer{Err: a.Err}.result()
		return tune.Proc{}, err
	}
	return a.Proc, nil
}

// MemAvailable implements tune.Host.
func (h *Host) MemAvailable() uint64 { return h.Mem }
