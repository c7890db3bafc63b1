//go:build !linux

package conntrack

import (
	"fmt"
	"runtime"
)

// Conn is a ctnetlink socket.
type Conn struct{}

// Dial returns an error wrapping ErrNotSupported.
func Dial() (*Conn, error) { return nil, fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS) }

// Close does nothing.
func (c *Conn) Close() error { return nil }

// Global returns an error wrapping ErrNotSupported.
func (c *Conn) Global() (Global, error) { return Global{}, ErrNotSupported }

// Stats returns an error wrapping ErrNotSupported.
func (c *Conn) Stats() (map[string]uint64, error) { return nil, ErrNotSupported }

// DialAt returns an error wrapping ErrNotSupported.
func DialAt(string) (*Conn, error) { return Dial() }

// Get returns an error wrapping ErrNotSupported.
func (c *Conn) Get(Tuple) (Entry, error) { return Entry{}, ErrNotSupported }
