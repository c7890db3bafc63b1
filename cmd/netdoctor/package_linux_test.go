package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repo is the repository's root, from this package's directory.
const repo = "../.."

// TestPackageDeb: `make package`'s script builds the tarball and the
// .deb from a binary; the .deb installs into a scratch root (dpkg
// --root, its own database) and the installed binary runs, with its man
// pages and completions where Debian looks for them.
func TestPackageDeb(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("dpkg --root installs as root")
	}
	for _, tool := range []string{"dpkg-deb", "dpkg", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "netdoctor")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X github.com/netdoctor/netdoctor/internal/cli.Version=v1.2.3-rc1", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dist := filepath.Join(tmp, "dist")
	pkg := exec.Command("scripts/package.sh", "v1.2.3-rc1")
	pkg.Dir = repo
	pkg.Env = append(os.Environ(), "BIN="+bin, "DIST="+dist)
	out, err := pkg.CombinedOutput()
	if err != nil {
		t.Fatalf("package.sh: %v\n%s", err, out)
	}
	deb := filepath.Join(dist, "netdoctor_1.2.3~rc1_amd64.deb")
	tarball := filepath.Join(dist, "netdoctor-v1.2.3-rc1-linux-amd64.tar.gz")
	for _, f := range []string{deb, tarball} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%v; package.sh said:\n%s", err, out)
		}
	}
	root := filepath.Join(tmp, "root")
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Unpacked, no maintainer script run (the root has no shell for
	// them; TestPackage runs the postinst): the unit is installed, not
	// enabled.
	install := exec.Command("dpkg", "--root="+root, "--force-not-root", "--force-depends", "--log=/dev/null", "--unpack", deb)
	if b, err := install.CombinedOutput(); err != nil {
		t.Fatalf("dpkg --unpack: %v\n%s", err, b)
	}
	got, err := exec.Command(filepath.Join(root, "usr/bin/netdoctor"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(got), "netdoctor v1.2.3-rc1 (") {
		t.Errorf("installed netdoctor --version: %v %q", err, got)
	}
	for _, f := range []string{
		"usr/share/man/man1/netdoctor.1.gz", "usr/share/man/man1/netdoctor-run.1.gz",
		"usr/share/bash-completion/completions/netdoctor", "usr/share/zsh/vendor-completions/_netdoctor",
		"usr/share/fish/vendor_completions.d/netdoctor.fish", "lib/systemd/system/netdoctor-agent.service",
	} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(root, "lib/systemd/system/netdoctor-agent.service"))
	if !bytes.Contains(unit, []byte("ExecStart=/usr/bin/netdoctor agent")) {
		t.Errorf("the packaged unit does not start /usr/bin/netdoctor:\n%s", unit)
	}
	status, _ := os.ReadFile(filepath.Join(root, "var/lib/dpkg/status"))
	if !bytes.Contains(status, []byte("Package: netdoctor\nStatus: install ok unpacked")) {
		t.Errorf("dpkg does not list netdoctor as unpacked:\n%s", status)
	}
	list, err := exec.Command("tar", "-tzf", tarball).Output()
	if err != nil || !strings.Contains(string(list), "netdoctor-v1.2.3-rc1-linux-amd64/netdoctor\n") || !strings.Contains(string(list), "man/man1/netdoctor-run.1.gz") {
		t.Errorf("tarball: %v\n%s", err, list)
	}
}

// TestBuildNeedsOnlyGo: `make build` runs nothing but the Go check and
// the compiler: with apt-get and dpkg replaced by programs that fail
// and note they were called, it builds, and nothing was installed.
func TestBuildNeedsOnlyGo(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not in PATH")
	}
	fake := t.TempDir()
	called := filepath.Join(fake, "called")
	for _, tool := range []string{"apt-get", "apt", "dpkg", "sudo"} {
		script := "#!/bin/sh\necho " + tool + " \"$@\" >> " + called + "\nexit 1\n"
		if err := os.WriteFile(filepath.Join(fake, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Into the repository's bin/, as a user's make build does.
	cmd := exec.Command("make", "--no-print-directory", "-s", "build")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "PATH="+fake+":"+filepath.Dir(goBin)+":/usr/bin:/bin")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make build: %v\n%s", err, b)
	}
	if log, _ := os.ReadFile(called); len(log) > 0 {
		t.Errorf("make build ran installers:\n%s", log)
	}
	dry, _ := exec.Command("make", "-n", "-C", repo, "build").Output()
	if strings.Contains(string(dry), "deps.sh lab") || strings.Contains(string(dry), "apt-get") {
		t.Errorf("make -n build:\n%s", dry)
	}
}
