//go:build !linux

package perf

import "errors"

// Sampler samples every CPU it was opened on (Linux only).
type Sampler struct {
	Hz   int
	Lost uint64
}

// Open is Linux only.
func Open(int, []int) (*Sampler, error) { return nil, errors.New("perf: Linux only") }

// Read does nothing.
func (s *Sampler) Read(func(*Sample)) error { return nil }

// CPUs are none.
func (s *Sampler) CPUs() []int { return nil }

// Close does nothing.
func (s *Sampler) Close() error { return nil }
