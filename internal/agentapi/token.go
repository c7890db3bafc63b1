package agentapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// MinToken is the shortest token accepted: 16 bytes, e.g. the output of
// `head -c 24 /dev/urandom | base64`.
const MinToken = 16

// ReadToken reads a bearer token from a file: its first line, without
// surrounding white space. The file must be a regular file that only its
// owner (root or the caller) can read or write: a token others can read
// protects nothing, one they can write lets them in.
func ReadToken(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("token file %s is a symlink: name the file itself", path)
		}
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
	line, _, _ := bytes.Cut(b, []byte("\n"))
	tok := bytes.TrimSpace(line)
	if len(tok) < MinToken {
		return nil, fmt.Errorf("token file %s: the token must be at least %d characters (e.g. head -c 24 /dev/urandom | base64 > %s)", path, MinToken, path)
	}
	if bytes.ContainsAny(tok, " \t\r") {
		return nil, fmt.Errorf("token file %s: the token must not contain white space", path)
	}
	return tok, nil
}
