package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// denyIOUring installs, for every thread of this process, a seccomp
// filter that refuses io_uring_setup(2) with errno, as container
// runtimes' default profiles do.
func denyIOUring(errno unix.Errno) error {
	arch := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if arch == 0 {
		return fmt.Errorf("no seccomp arch for %s", runtime.GOARCH)
	}
	insns, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipFalse: 3},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_IO_URING_SETUP, SkipFalse: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(errno)},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	})
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(insns))
	for i, in := range insns {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}

// seccompChild is what the child process of TestSeccompFallback
// reports.
type seccompChild struct {
	Result    *Result
	ForcedErr string
	Engine    Engine
	Note      string
}

// TestSeccompFallback: in a process whose seccomp filter refuses
// io_uring (EPERM, as Docker's default profile; ENOSYS, as others), the
// automatic engine runs epoll and the result says why; asking for
// io_uring is a clear error with the reason before any load; nothing
// fails. The filter
// lives in a child process (this test binary run again), since it
// cannot be removed once set.
func TestSeccompFallback(t *testing.T) {
	if url := os.Getenv("ND_LOAD_SECCOMP_URL"); url != "" {
		seccompChildMain(t, url)
		return
	}
	if _, _, err := choose(EngineIOUring); err != nil {
		t.Skipf("io_uring already refused here (%v): nothing to fall back from", err)
	}
	s := newCounting(t, nil)
	for _, errno := range []unix.Errno{unix.EPERM, unix.ENOSYS} {
		t.Run(unix.ErrnoName(errno), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSeccompFallback$", "-test.count=1")
			cmd.Env = append(os.Environ(), "ND_LOAD_SECCOMP_URL="+s.URL, fmt.Sprintf("ND_LOAD_SECCOMP_ERRNO=%d", errno))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v\n%s\n%s", err, out, stderr.String())
			}
			var got seccompChild
			line := out
			if i := strings.Index(string(out), "{"); i >= 0 {
				line = out[i:]
				if j := strings.Index(string(line), "\n"); j >= 0 {
					line = line[:j]
				}
			}
			if err := json.Unmarshal(line, &got); err != nil || got.Result == nil {
				t.Fatalf("child wrote %q: %v\n%s", out, err, stderr.String())
			}
			r := got.Result
			if r.Engine != EngineEpoll || got.Engine != EngineEpoll {
				t.Errorf("engine %q (EngineFor %q), want epoll where io_uring is refused", r.Engine, got.Engine)
			}
			name := "operation not permitted"
			if errno == unix.ENOSYS {
				name = "function not implemented"
			}
			if !strings.Contains(strings.Join(r.Notes, "\n"), "io_uring unavailable, the epoll engine ran") ||
				!strings.Contains(strings.Join(r.Notes, "\n"), name) || !strings.Contains(got.Note, name) {
				t.Errorf("notes %q (EngineFor %q): want the fallback and its reason (%s)", r.Notes, got.Note, name)
			}
			if r.Requests != 200 || r.Errors.Total() != 0 || r.Status["2xx"] != 200 {
				t.Errorf("requests %d, errors %+v, status %v: want 200 answered on epoll", r.Requests, r.Errors, r.Status)
			}
			if !strings.Contains(got.ForcedErr, "load engine unavailable: --engine io_uring") || !strings.Contains(got.ForcedErr, name) {
				t.Errorf("--engine io_uring under the filter: %q, want ErrEngine with the reason", got.ForcedErr)
			}
		})
	}
}

// seccompChildMain runs in the child: filter, then a load on auto and one
// forced on io_uring, reported as JSON on stdout.
func seccompChildMain(t *testing.T, url string) {
	var errno unix.Errno
	fmt.Sscan(os.Getenv("ND_LOAD_SECCOMP_ERRNO"), &errno)
	if err := denyIOUring(errno); err != nil {
		t.Fatal(err)
	}
	var rep seccompChild
	var err error
	rep.Engine, rep.Note, _ = EngineFor(EngineAuto)
	rep.Result, err = Run(context.Background(), Options{URL: url, Requests: 200, Connections: 4, Threads: 2, Duration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{URL: url, Requests: 10, Connections: 1, Threads: 1, Engine: EngineIOUring, Duration: 30 * time.Second})
	if !errors.Is(err, ErrEngine) {
		t.Fatalf("forced io_uring under the filter: %v, want ErrEngine", err)
	}
	rep.ForcedErr = err.Error()
	b, _ := json.Marshal(rep)
	fmt.Printf("%s\n", b)
}
