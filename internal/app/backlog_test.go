package app

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestRuntimeOf(t *testing.T) {
	tests := []struct {
		comm, cmdline string
		goBinary      bool
		want          RuntimeName
	}{
		{"python3", "python3 -u server.py", false, RuntimePython},
		{"python3.11", "/usr/bin/python3.11 app.py", false, RuntimePython},
		{"python3", "/usr/bin/python3 -m uvicorn app:app --port 8000", false, RuntimeUvicorn},
		{"gunicorn", "gunicorn: master [app:app]", false, RuntimeGunicorn},
		{"python3", "/srv/venv/bin/python3 /srv/venv/bin/gunicorn -w 4 app:app", false, RuntimeGunicorn},
		{"uvicorn", "/srv/venv/bin/python3 /srv/venv/bin/uvicorn main:app", false, RuntimeUvicorn},
		{"java", "java -Xmx1g -jar api.jar", false, RuntimeJava},
		{"node", "node server.js", false, RuntimeNode},
		{"nodejs", "", false, RuntimeNode},
		{"ruby", "puma 6.4.0 (tcp://0.0.0.0:9292) [app]", false, RuntimeRuby},
		{"nginx", "nginx: master process /usr/sbin/nginx", false, RuntimeNginx},
		{"php-fpm8.2", "php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)", false, RuntimePHPFPM},
		{"api-server", "/usr/local/bin/api-server --port 8080", true, RuntimeGo},
		{"api-server", "/usr/local/bin/api-server --port 8080", false, ""},
		{"", "", false, ""},
	}
	for _, tt := range tests {
		if got := RuntimeOf(tt.comm, tt.cmdline, tt.goBinary); got != tt.want {
			t.Errorf("RuntimeOf(%q, %q, %v) = %q, want %q", tt.comm, tt.cmdline, tt.goBinary, got, tt.want)
		}
	}
}

// TestBacklogSetting: each runtime is told its own setting, with the
// backlog in it, and never another server's syntax.
func TestBacklogSetting(t *testing.T) {
	for _, tt := range []struct {
		rt            RuntimeName
		want, notWant string
	}{
		{RuntimePython, "request_queue_size = 4096", "nginx"},
		{RuntimeGunicorn, "--backlog 4096", "nginx"},
		{RuntimeUvicorn, "--backlog 4096", "php-fpm"},
		{RuntimeGo, "net.core.somaxconn", "nginx"},
		{RuntimeJava, "server.tomcat.accept-count=4096", "nginx"},
		{RuntimeNode, "backlog: 4096", "nginx"},
		{RuntimeRuby, "backlog=4096", "nginx"},
		{"", "set it to 4096", "nginx"},
	} {
		got := BacklogSetting(tt.rt, 80, 4096)
		if !strings.Contains(got, tt.want) || strings.Contains(got, tt.notWant) {
			t.Errorf("%q: %q, want %q and no %q", tt.rt, got, tt.want, tt.notWant)
		}
	}
}

// TestDetectRuntime reads real processes: this test binary is a Go
// program (told from its build information, read as root only: as
// another user the binary is not root's alone, and is not read);
// python3, when installed, is not.
func TestDetectRuntime(t *testing.T) {
	want := RuntimeGo
	if os.Geteuid() != 0 {
		want = "" // a binary of this user's is not read
	}
	if got := DetectRuntime(os.Getpid()); got != want {
		t.Errorf("this test binary: %q, want %q", got, want)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to tell from a Go program")
	}
	cmd := exec.Command(py, "-c", "import time; print('ready', flush=True); time.sleep(30)")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	// It printed: it is python3 by now (comm is set at exec).
	if got := DetectRuntime(cmd.Process.Pid); got != RuntimePython {
		t.Errorf("python3: %q, want %q", got, RuntimePython)
	}
	if isGoBinary("/proc", cmd.Process.Pid) {
		t.Error("python3 taken for a Go program")
	}
}
