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
// .deb from a binary; the .deb holds the binary, the man pages and
// completions, the docs the README links, the license and copyright
// file, the changelog (lintian's verdict when it is installed); it
// installs into a scratch root (dpkg --root, its own database) and the
// installed binary runs, with its man pages and completions where
// Debian looks for them; and its postinst makes the agent's token
// (0600, in a 0700 directory, kept when there is one), run in a mount
// namespace of its own whose /etc is a tmpfs, so that the host's /etc is
// never touched; postrm purge removes it. One build and one package
// for all of it: each costs some 20 s of a CI pass.
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
	// zstd, not the release's xz: 14 s of a CPU less in CI's busiest
	// step, where this test was the longest (what is packaged, and how
	// dpkg unpacks it, is the same).
	pkg.Env = append(os.Environ(), "BIN="+bin, "DIST="+dist, "DEB_COMPRESS=zstd")
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
	// them; the postinst runs below, in a mount namespace): the unit is installed, not
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

	contents, err := exec.Command("dpkg-deb", "-c", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c %s: %v\n%s", deb, err, contents)
	}
	for _, want := range []string{"./usr/bin/netdoctor", "./usr/share/man/man1/netdoctor.1.gz", "./usr/share/bash-completion/completions/netdoctor",
		"./usr/share/doc/netdoctor/copyright", "./usr/share/doc/netdoctor/LICENSE", "./usr/share/doc/netdoctor/changelog.gz", "./usr/share/doc/netdoctor/CHANGELOG.md",
		"./usr/share/doc/netdoctor/README.md", "./usr/share/doc/netdoctor/report.md", "./usr/share/doc/netdoctor/findings.md", "./usr/share/doc/netdoctor/agent.md",
		"./usr/share/doc/netdoctor/licenses/github.com/yuin/gopher-lua/LICENSE", "./lib/systemd/system/netdoctor-agent.service"} {
		if !strings.Contains(string(contents), " "+want+"\n") {
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

	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) not installed: the postinst is not run")
	}
	ctl := filepath.Join(tmp, "control")
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
