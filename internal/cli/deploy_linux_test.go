package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnit: the agent's unit in deploy/systemd is one systemd
// accepts, and its command line one the agent accepts (the addresses and
// paths moved to a test's own).
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/systemd/netdoctor-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, l := range strings.Split(string(unit), "\n") {
		if rest, ok := strings.CutPrefix(l, "ExecStart=/usr/local/bin/netdoctor "); ok {
			args = strings.Fields(rest)
		}
	}
	if len(args) == 0 || args[0] != "agent" {
		t.Fatalf("no ExecStart=/usr/local/bin/netdoctor agent ... in the unit")
	}
	dir := t.TempDir()
	tok := filepath.Join(dir, "agent.token")
	if err := os.WriteFile(tok, []byte("unit-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(args)-1; i++ {
		switch args[i] {
		case "--listen":
			if args[i+1] != "0.0.0.0:9120" {
				t.Errorf("the unit listens on %s; docs/agent.md says 0.0.0.0:9120", args[i+1])
			}
			args[i+1] = "127.0.0.1:0"
		case "--metrics-listen":
			if args[i+1] != "127.0.0.1:9122" {
				t.Errorf("the unit serves /metrics alone on %s; docs/agent.md says 127.0.0.1:9122 (loopback)", args[i+1])
			}
			args[i+1] = "127.0.0.1:0"
		case "--token-file":
			args[i+1] = tok
		case "--incidents":
			args[i+1] = filepath.Join(dir, "incidents")
		}
	}
	args = append(args, "--dns-every", "0")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // parse, check, start and stop at once
	var out bytes.Buffer
	if code := Run(ctx, args, &out, &out); code != ExitOK {
		t.Errorf("netdoctor %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
	}

	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed: the unit's directives are not verified")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "netdoctor-agent.service")
	fixed := strings.ReplaceAll(string(unit), "/usr/local/bin/netdoctor", self)
	if err := os.WriteFile(path, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
