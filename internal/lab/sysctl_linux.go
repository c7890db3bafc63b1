package lab

import (
	"fmt"

	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/sysctl"
)

// Sysctl sets a namespace's own sysctl (net.core.somaxconn,
// net.ipv4.ip_local_port_range… are per namespace) and reads it back;
// the namespace takes it with it when it is deleted.
func (e *Env) Sysctl(ns netns.NS, key, value string) error {
	return sysctl.Write(ns, key, value)
}

// SetGlobal sets a host-wide sysctl (net.netfilter.nf_conntrack_max is
// one: read-only inside a namespace) in the initial namespace, and
// restores its old value on Close. The old value is journaled first.
// While several labs change the same setting, the value to come back to
// is the one from before the first of them, and the last lab out
// restores it.
func (e *Env) SetGlobal(name, value string) error {
	unlock, err := lockState()
	if err != nil {
		return err
	}
	defer unlock()
	host, err := netns.Initial()
	if err != nil {
		return err
	}
	g := &global{Sysctl: name}
	if g.Old, err = sysctl.Read(host, name); err != nil {
		return err
	}
	// Another live lab may have changed it already: the value to come
	// back to is the one from before the first of them.
	if o, ok := otherLabs(e.state.path)[g.file()]; ok {
		g.Old = o
	}
	if err := e.record(change{Global: g}); err != nil {
		return err
	}
	if err := sysctl.Write(host, name, value); err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}
