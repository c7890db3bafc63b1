package procnet

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Sysctl reads the sysctl name, such as "net.core.somaxconn", from
// sys/net/core/somaxconn. As with sysctl(8), a name that contains a slash
// is a path whose dots are literal: "net/ipv4/conf/eth0.100/rp_filter".
// The value is trimmed and each run of white space inside it is folded to
// one space, so ip_local_port_range reads "32768 60999", not
// "32768\t60999".
//
// The error of fs.ReadFile is returned unwrapped, so callers can test
// errors.Is(err, fs.ErrNotExist) for a sysctl this kernel does not have
// (or that does not exist in this network namespace).
func (p Proc) Sysctl(name string) (string, error) {
	b, err := fs.ReadFile(p.FS, SysctlPath(name))
	if err != nil {
		return "", err
	}
	return foldSpace(b), nil
}

// Sysctls reads several sysctls. A sysctl that does not exist is left out
// of the map without an error; other failures, such as a permission
// denied, are joined in the error, each with the sysctl's name, and the
// map holds the rest.
func (p Proc) Sysctls(names []string) (map[string]string, error) {
	m := make(map[string]string, len(names))
	var errs []error
	for _, name := range names {
		v, err := p.Sysctl(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("sysctl %s: %w", name, err))
			continue
		}
		m[name] = v
	}
	return m, errors.Join(errs...)
}

// SysctlPath returns the file below the procfs root that holds the
// sysctl name: "sys/net/core/somaxconn" for "net.core.somaxconn". Writers
// use it so that a name means the same file to them as to Sysctl.
func SysctlPath(name string) string {
	if strings.Contains(name, "/") {
		return "sys/" + strings.TrimPrefix(name, "/")
	}
	return "sys/" + strings.ReplaceAll(name, ".", "/")
}

// foldSpace returns b with leading and trailing white space removed and
// each inner run of white space replaced by one space. It reuses b.
func foldSpace(b []byte) string {
	n := 0
	space := false
	for _, c := range b {
		if isSpace(c) {
			space = n > 0
			continue
		}
		if space {
			b[n] = ' '
			n++
			space = false
		}
		b[n] = c
		n++
	}
	return string(b[:n])
}
