package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/symtab"
)

// Runtime is what runs a server, and how many threads it runs code on
// at once as it was started: what a CPU quota must match.
type Runtime struct {
	// Name is one of the RuntimeName constants, "" when unknown.
	Name RuntimeName `json:"name,omitempty"`
	// Version is the Go toolchain a Go program was built with ("go1.24.2").
	Version string `json:"version,omitempty"`
	// Parallelism is the threads it runs code on at once as configured
	// (GOMAXPROCS, -XX:ActiveProcessorCount, worker_processes, a
	// gunicorn's --workers), 0 when it sizes itself or is not known;
	// Source says where that was set.
	Parallelism int    `json:"parallelism,omitempty"`
	Source      string `json:"source,omitempty"`
	// QuotaAware says the runtime sizes its parallelism to the CPU quota
	// by itself: Go from 1.25 (unless GOMAXPROCS is set), the JVM from
	// JDK 10 and 8u191 (unless -XX:-UseContainerSupport).
	QuotaAware bool `json:"quota_aware,omitempty"`
}

// UnmarshalJSON reads a runtime, and the bare name that reports of
// netdoctor 0.9.0's development wrote ("runtime": "gunicorn").
func (r *Runtime) UnmarshalJSON(b []byte) error {
	var name string
	if json.Unmarshal(b, &name) == nil {
		*r = Runtime{Name: RuntimeName(name)}
		return nil
	}
	type plain Runtime
	return json.Unmarshal(b, (*plain)(r))
}

// runtimeOf tells the runtime of a server from its master process: its
// executable (a Go program's build information), command line and
// environment (GOMAXPROCS). The executable is opened read-only through
// /proc/PID/exe and read as data, within symtab's budget: an executable
// whose headers claim more is skipped, and the error says so.
func runtimeOf(proc string, p procInfo, kind string) (*Runtime, error) {
	base := path.Base(strings.TrimSuffix(p.exe, " (deleted)"))
	args := cmdArgs(proc, p.pid)
	switch {
	case kind == "nginx":
		return &Runtime{Name: RuntimeNginx}, nil
	case kind == "php-fpm":
		return &Runtime{Name: RuntimePHPFPM}, nil
	case base == "java" || p.comm == "java":
		rt := &Runtime{Name: RuntimeJava, QuotaAware: true}
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "-XX:ActiveProcessorCount="); ok {
				if n, err := strconv.Atoi(v); err == nil {
					rt.Parallelism, rt.Source = n, "-XX:ActiveProcessorCount="+v
				}
			}
			if a == "-XX:-UseContainerSupport" {
				rt.QuotaAware = false
			}
		}
		return rt, nil
	case base == "node" || base == "nodejs" || p.comm == "node":
		// One thread runs the JavaScript; more take a cluster of
		// processes, each a server of its own.
		return &Runtime{Name: RuntimeNode, Parallelism: 1, Source: "one JavaScript thread per process"}, nil
	case strings.HasPrefix(base, "python"):
		rt := &Runtime{Name: RuntimePython}
		for i, a := range args {
			v, ok := "", false
			switch {
			case a == "-w" || a == "--workers" || a == "--processes" || a == "-p":
				if i+1 < len(args) {
					v, ok = args[i+1], true
				}
			case strings.HasPrefix(a, "--workers="):
				v, ok = strings.TrimPrefix(a, "--workers="), true
			}
			if n, err := strconv.Atoi(v); ok && err == nil {
				rt.Parallelism, rt.Source = n, a+" "+v
			}
		}
		return rt, nil
	}
	f, err := symtab.OpenExe(proc, p.pid)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	bi, err := symtab.ReadBuildInfo(f)
	if errors.Is(err, symtab.ErrBudget) {
		return nil, fmt.Errorf("its executable %s was not read: %w", p.exe, err)
	} else if err != nil {
		return nil, nil
	}
	rt := &Runtime{Name: RuntimeGo, Version: bi.GoVersion, QuotaAware: goQuotaAware(bi.GoVersion)}
	if v, ok := environ(proc, p.pid, "GOMAXPROCS"); ok {
		rt.QuotaAware = false
		if n, err := strconv.Atoi(v); err == nil {
			rt.Parallelism, rt.Source = n, "GOMAXPROCS="+v+" in its environment"
		}
	}
	return rt, nil
}

// goQuotaAware: from Go 1.25 the runtime sets GOMAXPROCS to the CPU
// quota of the process's cgroup (v1 and v2), rounded up.
func goQuotaAware(v string) bool {
	v = strings.TrimPrefix(v, "go")
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i] // "26rc1"
	}
	a, err1 := strconv.Atoi(major)
	b, err2 := strconv.Atoi(minor)
	return err1 == nil && err2 == nil && (a > 1 || a == 1 && b >= 25)
}

// cmdArgs is a process's command line, split at its NULs.
func cmdArgs(proc string, pid int) []string {
	b, err := os.ReadFile(proc + "/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil
	}
	var out []string
	for a := range bytes.SplitSeq(bytes.TrimRight(b, "\x00"), []byte{0}) {
		out = append(out, string(a))
	}
	return out
}

// environ is the value of one variable in a process's environment, as
// it was started (/proc/PID/environ); only that variable is kept.
func environ(proc string, pid int, name string) (string, bool) {
	b, err := os.ReadFile(proc + "/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return "", false
	}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(name+"=")); ok {
			return string(v), true
		}
	}
	return "", false
}
