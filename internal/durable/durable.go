// Package durable replaces files so that a crash leaves either the old
// content or the new, never a mix, and the new content once the call
// returns: what a journal written before a change, and a configuration
// file an application rereads, both need.
package durable

import (
	"fmt"
	"os"
	"path/filepath"
)

// Keep, as uid or gid, leaves the new file's owner as the writer's.
const Keep = -1

// WriteFile replaces path with data: a temporary file beside it (the
// same filesystem, so the rename is atomic), with mode and owner set
// before it becomes visible, fsync'd, renamed over path, and the
// directory fsync'd so that the rename survives a crash too.
func WriteFile(path string, data []byte, mode os.FileMode, uid, gid int) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode) // CreateTemp makes it 0600
	}
	if err == nil && (uid != Keep || gid != Keep) {
		err = tmp.Chown(uid, gid)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir makes a directory's entries durable: a rename, a new or a
// removed file in it.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
