package tune

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadPlan reads what a user may be handed as a plan and runs the
// checks apply makes before it touches anything: any input is a plan or
// an error, never a panic, and the checks end (a plan's content is
// bounded work, however it is written).
func FuzzReadPlan(f *testing.F) {
	paths, _ := filepath.Glob("../../testdata/runs/golden/*.plan.json")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(`"kind": "file"`)) {
			f.Add(b)
			break
		}
	}
	f.Add([]byte(`{"version": 1, "changes": [{"kind": "sysctl", "key": "k", "sysctl": {"name": "kernel.core_pattern", "proposed": "|/tmp/evil %p"}}]}`))
	f.Add([]byte(`{"version": 1, "changes": [{"kind": "file", "key": "f", "file": {"path": "/etc/nginx/nginx.conf", "app": "nginx",` +
		`"diff": "a;\nlisten 80;\n", "content": "a;\nlisten 80 backlog=4096;\nkeepalive 16;\n", "validate": ["/bin/sh"], "reload": {"pid": 1, "signal": "HUP"}}}]}`))
	f.Add([]byte(`{"version": 1, "changes": [{"kind": "listen", "key": "l", "listen": {"addr": "127.0.0.1:80", "pid": 1, "backlog": -1, "proposed": 4096}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ReadPlan(bytes.NewReader(b))
		if err != nil {
			if p != nil || !strings.HasPrefix(err.Error(), "not a netdoctor plan") && !strings.HasPrefix(err.Error(), "plan change") {
				t.Fatalf("ReadPlan = %v, %v", p, err)
			}
			return
		}
		if err := p.Text(io.Discard); err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Changes {
			switch {
			case c.Sysctl != nil:
				err := checkAllowed(*c.Sysctl)
				if _, ok := allowed(c.Sysctl.Name); !ok && !errors.As(err, new(errNotPlanned)) {
					t.Fatalf("%s accepted: %v", c.Sysctl.Name, err)
				}
			case c.File != nil:
				// The plan's diff stands for the file as it is now.
				checkEdits(c.File.App, []byte(c.File.Diff), []byte(c.File.Content))
			}
		}
	})
}

// FuzzReadInput reads what a user may be handed as a report to plan
// from, and plans from it against seed 000's recorded host: any input is
// a plan, or an error, never a panic, and a plan proposes only what
// apply accepts.
func FuzzReadInput(f *testing.F) {
	for _, p := range []string{"testdata/seed000.json", "../../testdata/runs/golden/conntrack-sawtooth.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"version": 1, "command": "check", "findings": [{"id": "risky-sysctl", "subject": "net.core.somaxconn", "side": "server"}]}`))
	f.Add([]byte(`{"version": 1, "command": "run", "findings": [{"id": "nic-drops", "fix": ["sysctl -w net.core.netdev_max_backlog=99999999999"]}], "servers": [{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ReadInput(bytes.NewReader(b))
		if err != nil {
			return
		}
		p, err := Build(in, "fuzz.json", seed000Host())
		if err != nil {
			// A report naming lines its configuration file does not
			// have is refused; anything else is a bug.
			if !strings.Contains(err.Error(), "has no line") && !strings.Contains(err.Error(), "on this line") {
				t.Fatalf("Build: %v", err)
			}
			return
		}
		for _, c := range p.Changes {
			if c.Sysctl != nil {
				if err := checkAllowed(*c.Sysctl); err != nil {
					t.Fatalf("planned %s: %v", c.Title(), err)
				}
			}
		}
	})
}
