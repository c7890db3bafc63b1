package sysctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// missing is a setting that the kernel, or the namespace, does not have.
// It is fs.ErrNotExist, so callers tell it from a refusal with errors.Is.
type missing struct{ name string }

func (e missing) Error() string {
	return e.name + ": this kernel or namespace does not have it"
}

func (e missing) Is(target error) bool { return target == fs.ErrNotExist }

// Read returns the setting name ("net.core.somaxconn", or a path such as
// "net/ipv4/conf/eth0.100/rp_filter") as namespace ns sees it, white space
// folded as procnet folds it ("32768 60999"). A setting ns does not have
// returns an error wrapping fs.ErrNotExist; other errors come as netns
// and procnet give them, naming the namespace or the file.
func Read(ns netns.NS, name string) (string, error) {
	var v string
	err := ns.Do(func() error {
		var err error
		v, err = procnet.Default().Sysctl(name)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return "", missing{name}
	}
	return v, err
}

// Write sets name to value inside namespace ns and reads it back: the
// kernel may refuse a value (an error) or take another without one
// (0x10 reads back 16, a limit may be clamped), and either way the
// setting is not what the caller asked for. Values compare with white
// space folded, so "20000 20050" matches the "20000\t20050" read back.
func Write(ns netns.NS, name, value string) error {
	rel := procnet.SysctlPath(name)
	if name == "" || !fs.ValidPath(rel) {
		return fmt.Errorf("invalid sysctl name %q", name)
	}
	return ns.Do(func() error {
		f, err := os.OpenFile("/proc/"+rel, os.O_WRONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return missing{name}
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		_, err = f.WriteString(value)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s = %q: %w", name, value, err)
		}
		got, err := procnet.Default().Sysctl(name)
		if err != nil {
			return fmt.Errorf("read %s back: %w", name, err)
		}
		if got != Normalize(value) {
			return fmt.Errorf("%s reads %q after writing %q", name, got, value)
		}
		return nil
	})
}

// Normalize folds a value's white space as Read does: trimmed, each inner
// run one space.
func Normalize(v string) string { return strings.Join(strings.Fields(v), " ") }
