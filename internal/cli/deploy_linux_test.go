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

// TestPackage builds the tarball and the .deb with scripts/package.sh
// from a fresh build, and checks what the .deb installs: the binary, the
// man pages and completions, the docs the README links, the license and
// copyright file, the changelog; lintian's verdict when it is installed;
// and the postinst making the agent's token (0600, in a 0700 directory,
// kept when there is one), run in a mount namespace of its own whose
// /etc is a tmpfs, so that the host's /etc is never touched; postrm
// purge removes it.
func TestPackage(t *testing.T) {
	for _, tool := range []string{"dpkg-deb", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: the package is not built", tool)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "netdoctor")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../../cmd/netdoctor")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dist := filepath.Join(dir, "dist")
	pkg := exec.Command("../../scripts/package.sh")
	pkg.Env = append(os.Environ(), "BIN="+bin, "DIST="+dist)
	out, err := pkg.CombinedOutput()
	if err != nil {
		t.Fatalf("package.sh: %v\n%s", err, out)
	}
	version, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	deb := filepath.Join(dist, "netdoctor_"+strings.TrimSpace(string(version))+"_amd64.deb")
	list, err := exec.Command("dpkg-deb", "-c", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c %s: %v\n%s", deb, err, list)
	}
	for _, want := range []string{"./usr/bin/netdoctor", "./usr/share/man/man1/netdoctor.1.gz", "./usr/share/bash-completion/completions/netdoctor",
		"./usr/share/doc/netdoctor/copyright", "./usr/share/doc/netdoctor/LICENSE", "./usr/share/doc/netdoctor/changelog.gz", "./usr/share/doc/netdoctor/CHANGELOG.md",
		"./usr/share/doc/netdoctor/README.md", "./usr/share/doc/netdoctor/report.md", "./usr/share/doc/netdoctor/findings.md", "./usr/share/doc/netdoctor/agent.md",
		"./usr/share/doc/netdoctor/licenses/github.com/yuin/gopher-lua/LICENSE", "./lib/systemd/system/netdoctor-agent.service"} {
		if !strings.Contains(string(list), " "+want+"\n") {
			t.Errorf("the .deb lacks %s", want)
		}
	}
	if lintian, err := exec.LookPath("lintian"); err == nil {
		if out, err := exec.Command(lintian, "--tag-display-limit", "0", deb).CombinedOutput(); err != nil || strings.Contains(string(out), "E: ") || strings.Contains(string(out), "W: ") {
			t.Errorf("lintian %s: %v\n%s", deb, err, out)
		}
	} else {
		t.Log("lintian not installed: the .deb is not linted")
	}

	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace: the postinst is not run")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) not installed: the postinst is not run")
	}
	ctl := filepath.Join(dir, "control")
	if out, err := exec.Command("dpkg-deb", "-e", deb, ctl).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -e: %v\n%s", err, out)
	}
	script := `set -e
mount -t tmpfs tmpfs /etc
sh "$1/postinst" configure
stat -c '%a %n' /etc/netdoctor /etc/netdoctor/agent.token
first=$(cat /etc/netdoctor/agent.token)
sh "$1/postinst" configure
[ "$first" = "$(cat /etc/netdoctor/agent.token)" ] && echo kept
sh "$1/postrm" purge
[ ! -e /etc/netdoctor ] && echo purged
echo "token ${#first}"`
	res, err := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", ctl).CombinedOutput()
	if err != nil {
		t.Fatalf("postinst in a mount namespace: %v\n%s", err, res)
	}
	for _, want := range []string{"netdoctor: made the agent's token, /etc/netdoctor/agent.token (0600)", "700 /etc/netdoctor\n", "600 /etc/netdoctor/agent.token\n", "kept\n", "purged\n", "token 32\n"} {
		if !strings.Contains(string(res), want) {
			t.Errorf("postinst/postrm: want %q in\n%s", want, res)
		}
	}
}
