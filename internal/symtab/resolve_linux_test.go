package symtab

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// hotForTest is a function whose address the test resolves back to its
// name in this very process.
//
//go:noinline
func hotForTest(n int) int { return n*31 + 7 }

func TestResolveSelf(t *testing.T) {
	r := NewResolver("/proc", nil)
	maps, err := r.Maps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	pc := uint64(reflect.ValueOf(hotForTest).Pointer())
	f := r.UserFrame(os.Getpid(), maps, pc+4)
	if want := "github.com/netdoctor/netdoctor/internal/symtab.hotForTest"; f.Func != want {
		t.Errorf("UserFrame(%#x) = %+v, want %s; errors %v", pc, f, want, r.Errors())
	}
	exe, _ := os.Executable()
	if f.Module != exe {
		t.Errorf("module %q, want %q", f.Module, exe)
	}
	// A function of libc's is not in a Go test binary: an address in
	// no mapping names nothing.
	if f := r.UserFrame(os.Getpid(), maps, 8); f.Func != "" || f.Mapping != -1 {
		t.Errorf("address 8: %+v", f)
	}
}

// TestResolveGoBinaries builds a Go program as a position-independent
// executable, with symbols and stripped (-s -w: only .gopclntab names
// its functions), runs each, and names the address it prints.
func TestResolveGoBinaries(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain to build the test programs")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	os.WriteFile(src, []byte(`package main

import (
	"fmt"
	"os"
	"reflect"
)

//go:noinline
func spinHere(n int) int { return n*3 + 1 }

func main() {
	fmt.Printf("%d\n", reflect.ValueOf(spinHere).Pointer())
	os.Stdin.Read(make([]byte, 1))
}
`), 0o600)
	for _, tt := range []struct{ name, ldflags, source string }{
		{"pie", "", "symtab"},
		{"pie-stripped", "-s -w", "gopclntab"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bin := filepath.Join(dir, tt.name)
			build := exec.Command("go", "build", "-buildmode=pie", "-ldflags="+tt.ldflags, "-o", bin, src)
			build.Dir, build.Env = dir, append(os.Environ(), "GO111MODULE=off", "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			cmd := exec.Command(bin)
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { in.Close(); cmd.Wait() }()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			pc, _ := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
			r := NewResolver("/proc", nil)
			maps, err := r.Maps(cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			f := r.UserFrame(cmd.Process.Pid, maps, pc+2)
			if f.Func != "main.spinHere" {
				t.Errorf("UserFrame(%#x) = %+v, want main.spinHere; errors %v", pc, f, r.Errors())
			}
			fh, err := OpenExe("/proc", cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			o, err := LoadObject(fh)
			if err != nil || o.Source != tt.source {
				t.Errorf("names from %q (%v), want %q", o.Source, err, tt.source)
			}
		})
	}
	if runtime.GOARCH != "amd64" {
		t.Log("built for", runtime.GOARCH)
	}
}

func TestOpenExeRefusesNothingButRegular(t *testing.T) {
	// PID 2 is kthreadd: no executable to open.
	if _, err := OpenExe("/proc", 2); err == nil {
		t.Errorf("a kernel thread's exe opened")
	}
}
