package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/netdoctor/netdoctor/internal/durable"
)

// ErrFormat is wrapped by Read's error for a file that is not a journal
// of the shape asked for.
var ErrFormat = errors.New("not a netdoctor journal")

// Save writes v, indented JSON, to path through durable.WriteFile: the
// old journal or the new one survives a crash, never a mix, and the new
// one is on disk (file and directory fsync'd) when Save returns. Callers
// save before the change the journal records, so that a crash right
// after the change still finds the previous value. The file is 0600: it
// may hold configuration files' old contents.
func Save(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	return durable.WriteFile(path, append(b, '\n'), 0o600, durable.Keep, durable.Keep)
}

// Read decodes the journal at path into v. A file that cannot be read
// returns os.ReadFile's error unwrapped (callers test fs.ErrNotExist); one
// that does not decode returns an error wrapping ErrFormat.
func Read(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s is %w: %w", path, ErrFormat, err)
	}
	return nil
}

// List returns the journals (*.json) in dir, sorted by name, so oldest
// first when names start with their time; none when dir does not exist.
func List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	return paths, nil
}
