package agentapi

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MinToken is the shortest token accepted: 16 bytes, e.g. the output of
// `head -c 24 /dev/urandom | base64`.
const MinToken = 16

// ReadToken reads a bearer token from a file: its first line, without
// surrounding white space. The file must be a regular file that only its
// owner (root or the caller) can read or write: a token others can read
// protects nothing, one they can write lets them in. The path may go
// through symlinks owned by root or the caller, as a Kubernetes Secret
// volume's files do (token → ..data/token → ..2026_11_24…/token);
// a symlink anybody else owns could point the agent at their token.
func ReadToken(path string) ([]byte, error) {
	real, err := resolveOwned(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("token file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("token file %s can be read or written by others (mode %04o): chmod 600 %s", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("token file %s belongs to uid %d, not to root or this user", path, st.Uid)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	return ParseToken(b, "token file "+path)
}

// ParseToken is the token in b, read from what from names: its first
// line, without surrounding white space, at least MinToken characters.
func ParseToken(b []byte, from string) ([]byte, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	tok := bytes.TrimSpace(line)
	if len(tok) < MinToken {
		return nil, fmt.Errorf("%s: the token must be at least %d characters (e.g. head -c 24 /dev/urandom | base64)", from, MinToken)
	}
	if bytes.ContainsAny(tok, " \t\r") {
		return nil, fmt.Errorf("%s: the token must not contain white space", from)
	}
	return tok, nil
}

// maxLinks bounds the symlinks resolveOwned follows, as the kernel's
// MAXSYMLINKS does.
const maxLinks = 40

// resolveOwned resolves path's symlinks one component at a time and
// returns the path without any, refusing a symlink that neither root nor
// the caller owns.
func resolveOwned(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	rest := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	done, links := "/", 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		next := filepath.Join(done, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("token file %s: too many levels of symlinks", path)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
			return "", fmt.Errorf("token file %s goes through symlink %s of uid %d, not root's or this user's", path, next, st.Uid)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		if filepath.IsAbs(target) {
			done = "/"
		}
		rest = append(strings.Split(strings.Trim(target, "/"), "/"), rest...)
	}
	return done, nil
}
