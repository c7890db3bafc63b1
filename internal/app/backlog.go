package app

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/symtab"
	"github.com/netdoctor/netdoctor/internal/trust"
)

// RuntimeName is what serves a listener as far as its process shows it:
// the language runtime or the server program whose own setting is the
// backlog its listen() asks for. Empty when netdoctor cannot tell.
type RuntimeName string

// Runtimes netdoctor can tell, each with its backlog setting
// (BacklogSetting).
const (
	RuntimePython   RuntimeName = "python"   // socketserver, http.server, a bare socket.listen()
	RuntimeGunicorn RuntimeName = "gunicorn" // gunicorn --backlog
	RuntimeUvicorn  RuntimeName = "uvicorn"  // uvicorn --backlog
	RuntimeGo       RuntimeName = "go"       // net.Listen: the backlog is net.core.somaxconn
	RuntimeJava     RuntimeName = "java"     // ServerSocket, Tomcat's acceptCount, Netty's SO_BACKLOG
	RuntimeNode     RuntimeName = "node"     // server.listen({backlog})
	RuntimeRuby     RuntimeName = "ruby"     // Puma's bind …?backlog=, Unicorn's :backlog
	RuntimeNginx    RuntimeName = "nginx"    // listen … backlog=
	RuntimePHPFPM   RuntimeName = "php-fpm"  // listen.backlog
)

// RuntimeOf names the runtime of a process from its command name (comm),
// its command line (arguments separated by spaces; "" when unknown) and
// whether its executable is a Go program. The command line decides
// between a bare interpreter and the server it runs (gunicorn, uvicorn
// and Puma often run as "python3" or "ruby"); a Go program has a name of
// its own, so only its executable tells.
func RuntimeOf(comm, cmdline string, goBinary bool) RuntimeName {
	args := strings.Fields(cmdline)
	base := func(i int) string {
		if i >= len(args) {
			return ""
		}
		return filepath.Base(args[i])
	}
	// The program the interpreter runs: its first argument that is not
	// an option ("python3 -m uvicorn app:app": uvicorn).
	ran := ""
	for i := 1; i < len(args) && ran == ""; i++ {
		switch a := args[i]; {
		case a == "-m" && i+1 < len(args):
			ran = args[i+1]
		case !strings.HasPrefix(a, "-"):
			ran = base(i)
		}
	}
	for _, s := range []string{comm, base(0), ran} {
		switch s = strings.ToLower(s); {
		case s == "":
		case strings.HasPrefix(s, "gunicorn"):
			return RuntimeGunicorn
		case strings.HasPrefix(s, "uvicorn"):
			return RuntimeUvicorn
		case s == "nginx":
			return RuntimeNginx
		case strings.HasPrefix(s, "php-fpm"):
			return RuntimePHPFPM
		case strings.HasPrefix(s, "puma"), strings.HasPrefix(s, "unicorn"):
			return RuntimeRuby
		}
	}
	for _, s := range []string{comm, base(0)} {
		switch s = strings.ToLower(s); {
		case strings.HasPrefix(s, "python"):
			return RuntimePython
		case s == "java":
			return RuntimeJava
		case s == "node", s == "nodejs":
			return RuntimeNode
		case strings.HasPrefix(s, "ruby"):
			return RuntimeRuby
		}
	}
	if goBinary {
		return RuntimeGo
	}
	return ""
}

// BacklogSetting says how an application of runtime rt listening on
// port asks listen() for a backlog of n: its setting and that setting's
// default, or, for a runtime netdoctor cannot tell, what to look for.
// The kernel keeps the backlog a socket listened with, so each ends with
// the restart (or nginx's reload, which listens again).
func BacklogSetting(rt RuntimeName, port, n int) string {
	switch rt {
	case RuntimePython:
		return fmt.Sprintf("Python: socketserver's (and http.server's) `request_queue_size = %d` on the server class (default 5), or `sock.listen(%d)` for a socket of its own; then restart it", n, n)
	case RuntimeGunicorn:
		return fmt.Sprintf("gunicorn: `--backlog %d` (or `backlog = %d` in its configuration; default 2048); then restart it", n, n)
	case RuntimeUvicorn:
		return fmt.Sprintf("uvicorn: `--backlog %d` (default 2048); then restart it", n)
	case RuntimeGo:
		return "Go: net.Listen asks listen() for net.core.somaxconn as it was when the program first listened (no setting of its own): with somaxconn large enough, restart the program"
	case RuntimeJava:
		return fmt.Sprintf("Java: Spring Boot's `server.tomcat.accept-count=%d` (Tomcat's connector `acceptCount`, default 100), the backlog of `new ServerSocket(port, %d)` (default 50), or Netty's `ChannelOption.SO_BACKLOG`; then restart it", n, n)
	case RuntimeNode:
		return fmt.Sprintf("Node.js: `server.listen({port, backlog: %d})` (default 511); then restart it", n)
	case RuntimeRuby:
		return fmt.Sprintf("Puma: `bind 'tcp://HOST:PORT?backlog=%d'` (default 1024); Unicorn: `listen PORT, backlog: %d`; then restart it", n, n)
	case RuntimeNginx:
		p := "…"
		if port > 0 {
			p = strconv.Itoa(port)
		}
		return fmt.Sprintf("nginx: `listen %s backlog=%d;` (default 511); nginx listens again on reload when the backlog changes", p, n)
	case RuntimePHPFPM:
		return fmt.Sprintf("php-fpm: `listen.backlog = %d` in the pool (default 511); then restart php-fpm (its reload keeps the socket)", n)
	}
	return fmt.Sprintf("look for the backlog the application passes to listen() (a setting often named backlog, accept-count or queue size; default often 128 or 511) and set it to %d; then restart it", n)
}

// DetectRuntime reads the runtime of process pid from /proc.
func DetectRuntime(pid int) RuntimeName { return detectRuntime("/proc", pid) }

func detectRuntime(proc string, pid int) RuntimeName {
	p, ok := readProc(proc, pid)
	if !ok {
		return ""
	}
	return RuntimeOf(p.comm, p.cmdline, isGoBinary(proc, pid))
}

// isGoBinary reports whether process pid runs a Go program: its
// executable carries Go's build information. The executable is read as
// data, never run, and only when root alone controls it (trust.Owned:
// root's file, down a path of directories only root can write, opened
// without following another user's symlink) and it is still the file the
// process runs; a binary another user controls is not read, and its
// runtime stays unknown. It is read within symtab's budget
// (symtab.ReadBuildInfo), as any executable is.
func isGoBinary(proc string, pid int) bool {
	link := filepath.Join(proc, strconv.Itoa(pid), "exe")
	exe, err := os.Readlink(link)
	if err != nil || !filepath.IsAbs(exe) || strings.HasSuffix(exe, " (deleted)") {
		return false
	}
	f, err := trust.FS{Root: "/", Mode: trust.Owned}.Open(strings.TrimPrefix(exe, "/"))
	if err != nil {
		return false
	}
	defer f.Close()
	r, ok := f.(interface {
		io.ReaderAt
		Stat() (fs.FileInfo, error)
	})
	if !ok {
		return false
	}
	onDisk, err1 := r.Stat()
	running, err2 := os.Stat(link)
	if err1 != nil || err2 != nil || !onDisk.Mode().IsRegular() || !os.SameFile(onDisk, running) {
		return false
	}
	_, err = symtab.ReadBuildInfo(r)
	return err == nil
}
