//go:build !linux

package dropmon

import (
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// Monitor is the drop monitor; it runs on Linux only.
type Monitor struct{}

// Start says the monitor needs Linux.
func Start() (*Monitor, error) { return nil, unavailable("not Linux", nil) }

// Close does nothing.
func (m *Monitor) Close() error { return nil }

// Since is the zero time.
func (m *Monitor) Since() time.Time { return time.Time{} }

// RetransUnavailable says Linux is needed.
func (m *Monitor) RetransUnavailable() string { return "not Linux" }

// Read says the monitor needs Linux.
func (m *Monitor) Read() (*Counts, error) { return nil, unavailable("not Linux", nil) }

// Drops has nothing to say.
func (m *Monitor) Drops(*Counts, uint64) *evidence.Drops {
	return &evidence.Drops{Unavailable: "not Linux"}
}
