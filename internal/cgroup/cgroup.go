// Package cgroup finds the control group that limits a process's CPU and
// reads what it did: its quota (cgroup v2 cpu.max, v1
// cpu.cfs_quota_us/cpu.cfs_period_us), its throttling (cpu.stat) and its
// CPU pressure (a v2 group's cpu.pressure, else /proc/pressure/cpu).
//
// Both versions are read, and a host may mount both (the hybrid layout,
// v1 controllers beside a v2 mount at /sys/fs/cgroup/unified): the cpu
// controller lives in one of them, and pressure is a v2 file whatever
// controls the CPU. A quota set on an ancestor (a Kubernetes pod's, above
// its containers') limits every group below it, so the limit is the
// tightest on the way from the process's group to the root.
//
// Every file is read through an fs.FS rooted at "/", so fixtures stand
// in for /proc and /sys/fs/cgroup in tests.
package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/procnet"
)

// ErrParse is wrapped by every error about a file that was read but not
// fully understood; what was parsed before the damage is returned with it.
var ErrParse = errors.New("parse error")

// Group is where a process's CPU is limited and accounted.
type Group struct {
	// Version is the hierarchy of the cpu controller: 1 or 2. 0 when
	// no cpu controller is mounted (then there is no quota either).
	Version int `json:"version,omitempty"`
	// Path is the process's group in that hierarchy, as
	// /proc/PID/cgroup names it ("/system.slice/api.service").
	Path string `json:"path,omitempty"`
	// Limit is the tightest CPU quota from the group up to the root, nil
	// when none is set.
	Limit *Limit `json:"limit,omitempty"`
	// Pressure is the file CPU pressure is read from: the process's v2
	// group's cpu.pressure, or /proc/pressure/cpu (system-wide) where
	// there is none; empty when neither exists.
	Pressure string `json:"pressure,omitempty"`

	// statFile is the cpu.stat to read throttling from: the limiting
	// group's (only it throttles), else the process's own group's.
	statFile string
	// root prefixes every path read: "proc/1/root/" when this
	// process's mount namespace has no cgroup mounts (ip netns exec
	// mounts a fresh /sys), so that init's are read.
	root string
}

// Limit is a CPU quota: Quota of CPU time per Period, across all CPUs.
type Limit struct {
	// Path is the group that sets it: the process's or an ancestor's.
	Path   string        `json:"path"`
	Quota  time.Duration `json:"quota_ns"`
	Period time.Duration `json:"period_ns"`
	// File is the file that says so, as a path on the host
	// ("/sys/fs/cgroup/cpu/ndtest/cpu.cfs_quota_us").
	File string `json:"file"`
}

// CPUs is the quota in CPUs: 0.2 for 20 ms per 100 ms.
func (l Limit) CPUs() float64 {
	if l.Period <= 0 {
		return 0
	}
	return float64(l.Quota) / float64(l.Period)
}

// String is "0.2 CPU (20ms per 100ms period)".
func (l Limit) String() string {
	unit := "CPUs"
	if l.CPUs() <= 1 {
		unit = "CPU"
	}
	return fmt.Sprintf("%s %s (%v per %v period)", strconv.FormatFloat(math.Round(l.CPUs()*100)/100, 'f', -1, 64), unit, l.Quota, l.Period)
}

// Stat is the throttling counters of a cpu.stat, cumulative since the
// group was created.
type Stat struct {
	// Periods are the enforcement periods in which the group ran;
	// Throttled those in which it used its quota up and was stopped.
	Periods, Throttled uint64
	// ThrottledTime is how long its run queues stayed throttled,
	// summed over CPUs: two CPUs held for 80 ms count 160 ms.
	ThrottledTime time.Duration
}

// mount is one cgroup file system mount.
type mount struct {
	root, point string
	v2          bool
	controllers []string // v1: the controllers bound to it
}

// Resolve finds the group that holds process pid's CPU. fsys is rooted
// at "/": /proc/self/mountinfo says where the hierarchies are mounted,
// /proc/PID/cgroup where the process is in them.
func Resolve(fsys fs.FS, pid int) (*Group, error) {
	mi, err := fs.ReadFile(fsys, "proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	mounts, merr := parseMountinfo(mi)
	root := ""
	if len(mounts) == 0 {
		// A mount namespace without cgroup file systems: `ip netns
		// exec` mounts a sysfs of its own over /sys. Init's namespace
		// has them, or the one netdoctor was started from: read
		// through /proc/PID/root of the first that does and lets us.
		for _, pid := range mountCandidates(fsys) {
			b, err := fs.ReadFile(fsys, "proc/"+strconv.Itoa(pid)+"/mountinfo")
			if err != nil {
				continue
			}
			m, err := parseMountinfo(b)
			r := "proc/" + strconv.Itoa(pid) + "/root"
			if err == nil && len(m) > 0 && dirExists(fsys, r+m[0].point) {
				mounts, merr, root = m, nil, r
				break
			}
		}
	}
	// The process's groups are read from this /proc, whatever the
	// mounts: the PID namespace is the same.
	cg, err := fs.ReadFile(fsys, "proc/"+strconv.Itoa(pid)+"/cgroup")
	if err != nil {
		return nil, err
	}
	var g *Group
	if sub, serr := fs.Sub(fsys, root); root != "" && serr == nil {
		g, err = resolve(sub, cg, mounts, merr)
		g.root = root
	} else {
		g, err = resolve(fsys, cg, mounts, merr)
	}
	if g.Pressure == "" && exists(fsys, "proc/pressure/cpu") {
		g.Pressure = "/proc/pressure/cpu" // read from this /proc (Read)
	}
	return g, err
}

// resolve is Resolve once the process's /proc/PID/cgroup (cg) and the
// mounts are read; fsys is where the mounts' files are.
func resolve(fsys fs.FS, cg []byte, mounts []mount, merr error) (*Group, error) {
	members, perr := parseProcCgroup(cg)
	g := &Group{}
	var v2path string
	hasV2 := false
	for _, m := range members {
		if m.hier == 0 && len(m.controllers) == 0 {
			v2path, hasV2 = m.path, true
		}
	}
	// The cpu controller: a v1 hierarchy that has it, else v2's.
	for _, m := range members {
		if m.hier == 0 || !contains(m.controllers, "cpu") {
			continue
		}
		if mt, ok := v1Mount(mounts, "cpu"); ok {
			if dir, ok := under(mt, m.path); ok {
				g.Version, g.Path = 1, m.path
				g.Limit, g.statFile = v1Limit(fsys, mt, dir)
			}
		}
	}
	v2mt, v2ok := v2Mount(mounts)
	if g.Version == 0 && hasV2 && v2ok {
		if dir, ok := under(v2mt, v2path); ok && exists(fsys, dir+"/cpu.max") {
			g.Version, g.Path = 2, v2path
			g.Limit, g.statFile = v2Limit(fsys, v2mt, dir)
		}
	}
	// Pressure is v2's, whatever holds the cpu controller.
	if hasV2 && v2ok {
		if dir, ok := under(v2mt, v2path); ok && exists(fsys, dir+"/cpu.pressure") {
			g.Pressure = "/" + dir + "/cpu.pressure"
		}
	}

	return g, errors.Join(merr, perr)
}

// Read reads the group's throttling counters and its CPU pressure; a
// group with no cpu controller has no counters (zero, no error).
func (g *Group) Read(fsys fs.FS) (Stat, *procnet.Pressure, error) {
	proc := fsys // /proc is this process's, the cgroups maybe init's
	if g.root != "" {
		sub, err := fs.Sub(fsys, g.root)
		if err != nil {
			return Stat{}, nil, err
		}
		fsys = sub
	}
	var st Stat
	var errs []error
	if g.statFile != "" {
		b, err := fs.ReadFile(fsys, g.statFile)
		if err == nil {
			st, err = ParseStat(b)
		}
		errs = append(errs, err)
	}
	var psi *procnet.Pressure
	if g.Pressure != "" {
		from := fsys
		if strings.HasPrefix(g.Pressure, "/proc/") {
			from = proc
		}
		b, err := fs.ReadFile(from, strings.TrimPrefix(g.Pressure, "/"))
		if err == nil {
			var p procnet.Pressure
			p, err = procnet.ParsePressure(b)
			psi = &p
		}
		errs = append(errs, err)
	}
	return st, psi, errors.Join(errs...)
}

// v1Limit walks from the group's directory up to the hierarchy's root
// for the tightest cpu.cfs_quota_us (-1: none) over its cpu.cfs_period_us.
func v1Limit(fsys fs.FS, mt mount, dir string) (*Limit, string) {
	var best *Limit
	for d := dir; ; d = path.Dir(d) {
		q, err1 := readInt(fsys, d+"/cpu.cfs_quota_us")
		p, err2 := readInt(fsys, d+"/cpu.cfs_period_us")
		if err1 == nil && err2 == nil && q > 0 && p > 0 {
			l := &Limit{Path: groupPath(mt, d), Quota: time.Duration(q) * time.Microsecond, Period: time.Duration(p) * time.Microsecond, File: "/" + d + "/cpu.cfs_quota_us"}
			if best == nil || l.CPUs() < best.CPUs() {
				best = l
			}
		}
		if d == strings.TrimPrefix(mt.point, "/") || d == "." || d == "/" {
			break
		}
	}
	return best, statFile(mt, dir, best)
}

// v2Limit walks from the group's directory up to the root for the
// tightest cpu.max ("max 100000": none).
func v2Limit(fsys fs.FS, mt mount, dir string) (*Limit, string) {
	var best *Limit
	for d := dir; ; d = path.Dir(d) {
		if b, err := fs.ReadFile(fsys, d+"/cpu.max"); err == nil {
			if q, p, err := ParseMax(b); err == nil && q > 0 {
				l := &Limit{Path: groupPath(mt, d), Quota: q, Period: p, File: "/" + d + "/cpu.max"}
				if best == nil || l.CPUs() < best.CPUs() {
					best = l
				}
			}
		}
		if d == strings.TrimPrefix(mt.point, "/") || d == "." || d == "/" {
			break
		}
	}
	return best, statFile(mt, dir, best)
}

// statFile is the cpu.stat that counts the group's throttling: the
// limiting group's, since a quota throttles the group that sets it.
func statFile(mt mount, dir string, l *Limit) string {
	if l != nil {
		return path.Dir(strings.TrimPrefix(l.File, "/")) + "/cpu.stat"
	}
	return dir + "/cpu.stat"
}

// groupPath is the group a directory of mount mt is, as /proc/PID/cgroup
// would name it.
func groupPath(mt mount, dir string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix("/"+dir, mt.point), "/")
	return path.Join(mt.root, "/"+rel)
}

// under is the directory (relative to "/") of group p in mount mt: the
// group's path less the mount's root. ok is false when the group is not
// below the mount's root (a namespace that does not see it).
func under(mt mount, p string) (string, bool) {
	if !path.IsAbs(p) || path.Clean(p) != p || strings.Contains(p, "/../") {
		return "", false
	}
	rel, ok := strings.CutPrefix(p, mt.root)
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && mt.root != "/") {
		return "", false
	}
	return strings.TrimPrefix(path.Join(mt.point, "/"+strings.TrimPrefix(rel, "/")), "/"), true
}

func v1Mount(ms []mount, controller string) (mount, bool) {
	for _, m := range ms {
		if !m.v2 && contains(m.controllers, controller) {
			return m, true
		}
	}
	return mount{}, false
}

func v2Mount(ms []mount) (mount, bool) {
	for _, m := range ms {
		if m.v2 {
			return m, true
		}
	}
	return mount{}, false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// mountCandidates are the processes whose mount namespace may have the
// cgroup mounts this one lacks: init, then this process's ancestors.
func mountCandidates(fsys fs.FS) []int {
	out := []int{1}
	pid := "self"
	for range 8 {
		b, err := fs.ReadFile(fsys, "proc/"+pid+"/stat")
		if err != nil {
			break
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if i < 0 || len(f) < 2 {
			break
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil || ppid <= 1 {
			break
		}
		out = append(out, ppid)
		pid = f[1]
	}
	return out
}

func dirExists(fsys fs.FS, name string) bool {
	st, err := fs.Stat(fsys, name)
	return err == nil && st.IsDir()
}

func exists(fsys fs.FS, name string) bool {
	st, err := fs.Stat(fsys, name)
	return err == nil && st.Mode().IsRegular()
}

func readInt(fsys fs.FS, name string) (int64, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, err
	}
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok {
		return 0, fmt.Errorf("%w: %s: truncated: no newline at the end of the file", ErrParse, name)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrParse, name, err)
	}
	return n, nil
}

// ParseMax parses a v2 cpu.max: "20000 100000" (quota and period in
// microseconds) or "max 100000" (no quota: 0).
func ParseMax(b []byte) (quota, period time.Duration, err error) {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok {
		return 0, 0, fmt.Errorf("%w: cpu.max: truncated: no newline at the end of the file", ErrParse)
	}
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("%w: cpu.max: want quota and period, got %q", ErrParse, s)
	}
	p, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil || p == 0 {
		return 0, 0, fmt.Errorf("%w: cpu.max: period %q", ErrParse, f[1])
	}
	period = time.Duration(p) * time.Microsecond
	if f[0] == "max" {
		return 0, period, nil
	}
	q, err := strconv.ParseUint(f[0], 10, 40)
	if err != nil {
		return 0, period, fmt.Errorf("%w: cpu.max: quota %q", ErrParse, f[0])
	}
	return time.Duration(q) * time.Microsecond, period, nil
}

// ParseStat parses a cpu.stat of either version: v1 has nr_periods,
// nr_throttled and throttled_time (ns); v2 the same counts with
// throttled_usec, after its usage lines. Unknown lines are skipped.
func ParseStat(b []byte) (Stat, error) {
	var st Stat
	var errs []string
	body := b
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		body = b[:i+1]
		errs = append(errs, "truncated: no newline at the end of the file")
	}
	for n, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			if line != "" {
				errs = append(errs, fmt.Sprintf("line %d: %q", n+1, line))
			}
			continue
		}
		var dst *uint64
		var scale time.Duration
		var tmp uint64
		switch k {
		case "nr_periods":
			dst = &st.Periods
		case "nr_throttled":
			dst = &st.Throttled
		case "throttled_time":
			dst, scale = &tmp, time.Nanosecond
		case "throttled_usec":
			dst, scale = &tmp, time.Microsecond
		default:
			continue
		}
		x, err := strconv.ParseUint(strings.TrimSpace(v), 10, 63)
		if err != nil {
			errs = append(errs, fmt.Sprintf("line %d: %s: %v", n+1, k, err))
			continue
		}
		*dst = x
		if scale != 0 {
			st.ThrottledTime = time.Duration(min(x, uint64(math.MaxInt64/scale))) * scale
		}
	}
	if len(errs) > 0 {
		return st, fmt.Errorf("%w: cpu.stat: %s", ErrParse, strings.Join(errs, "; "))
	}
	return st, nil
}

// member is one line of /proc/PID/cgroup: "4:cpu,cpuacct:/docker/9c1e"
// (v1: hierarchy ID, controllers, path) or "0::/system.slice/x" (v2).
type member struct {
	hier        int
	controllers []string
	path        string
}

func parseProcCgroup(b []byte) ([]member, error) {
	var out []member
	var errs []string
	body := b
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		body = b[:i+1]
		errs = append(errs, "truncated: no newline at the end of the file")
	}
	for n, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		ctl, p, ok2 := strings.Cut(rest, ":")
		h, err := strconv.Atoi(id)
		if !ok1 || !ok2 || err != nil || h < 0 {
			errs = append(errs, fmt.Sprintf("line %d: %q", n+1, line))
			continue
		}
		m := member{hier: h, path: p}
		for c := range strings.SplitSeq(ctl, ",") {
			if c != "" {
				m.controllers = append(m.controllers, c)
			}
		}
		out = append(out, m)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%w: PID/cgroup: %s", ErrParse, strings.Join(errs, "; "))
	}
	return out, nil
}

// parseMountinfo keeps the cgroup mounts of /proc/self/mountinfo:
//
//	32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
//	41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
//
// Fields: ID, parent, device, root, mount point, options, optional
// fields up to "-", then the file system type, source and super options
// (a v1 mount's controllers). Paths escape spaces and such as \040.
func parseMountinfo(b []byte) ([]mount, error) {
	var out []mount
	var errs []string
	body := b
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		body = b[:i+1]
		errs = append(errs, "truncated: no newline at the end of the file")
	}
	for n, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 6 || sep < 0 || sep+3 > len(f) {
			if line != "" {
				errs = append(errs, fmt.Sprintf("line %d: too few fields", n+1))
			}
			continue
		}
		fstype := f[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		m := mount{root: unescape(f[3]), point: unescape(f[4]), v2: fstype == "cgroup2"}
		if !m.v2 && sep+3 < len(f) {
			for o := range strings.SplitSeq(f[sep+3], ",") {
				switch o {
				case "rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "xattr", "clone_children", "noprefix":
				default:
					if !strings.Contains(o, "=") {
						m.controllers = append(m.controllers, o)
					}
				}
			}
		}
		out = append(out, m)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%w: mountinfo: %s", ErrParse, strings.Join(errs, "; "))
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
