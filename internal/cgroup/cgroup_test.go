package cgroup

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/netdoctor/netdoctor/internal/procnet"
)

func TestResolve(t *testing.T) {
	tests := []struct {
		fixture   string
		want      Group
		stat      Stat
		pressure  float64 // Some.Avg10
		wantParse bool
	}{{
		// Captured on the hybrid host: cpu is a v1 controller, pressure
		// comes from the v2 mount at /sys/fs/cgroup/unified.
		fixture: "v1",
		want: Group{Version: 1, Path: "/ndtest", Pressure: "/sys/fs/cgroup/unified/cpu.pressure",
			Limit: &Limit{Path: "/ndtest", Quota: 20 * time.Millisecond, Period: 100 * time.Millisecond, File: "/sys/fs/cgroup/cpu/ndtest/cpu.cfs_quota_us"}},
		stat:     Stat{Periods: 31, Throttled: 31, ThrottledTime: 4822376271},
		pressure: 28.04,
	}, {
		// The same, read from inside `ip netns exec`, whose mount
		// namespace has a fresh /sys without cgroups: init's are read
		// through /proc/1/root (proc/self/mountinfo is a real capture).
		fixture: "netns",
		want: Group{Version: 1, Path: "/ndtest", Pressure: "/sys/fs/cgroup/unified/cpu.pressure",
			Limit: &Limit{Path: "/ndtest", Quota: 20 * time.Millisecond, Period: 100 * time.Millisecond, File: "/sys/fs/cgroup/cpu/ndtest/cpu.cfs_quota_us"}},
		stat:     Stat{Periods: 31, Throttled: 31, ThrottledTime: 4822376271},
		pressure: 28.04,
	}, {
		fixture: "v2",
		want: Group{Version: 2, Path: "/system.slice/api.service", Pressure: "/sys/fs/cgroup/system.slice/api.service/cpu.pressure",
			Limit: &Limit{Path: "/system.slice/api.service", Quota: 20 * time.Millisecond, Period: 100 * time.Millisecond, File: "/sys/fs/cgroup/system.slice/api.service/cpu.max"}},
		stat:     Stat{Periods: 31, Throttled: 31, ThrottledTime: 4822376 * time.Microsecond},
		pressure: 86.52,
	}, {
		// The pod's limit, two levels up, throttles the container.
		fixture: "v2pod",
		want: Group{Version: 2, Path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7f3a.slice/cri-containerd-9c1e.scope",
			Pressure: "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7f3a.slice/cri-containerd-9c1e.scope/cpu.pressure",
			Limit: &Limit{Path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7f3a.slice", Quota: 50 * time.Millisecond, Period: 100 * time.Millisecond,
				File: "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7f3a.slice/cpu.max"}},
		stat:     Stat{Periods: 1200, Throttled: 1130, ThrottledTime: 61220418 * time.Microsecond},
		pressure: 61.20,
	}, {
		// Inside a container: cpu and cpuacct co-mounted, the mount's
		// root is the container's own group.
		fixture: "odd",
		want: Group{Version: 1, Path: "/docker/9c1e2f", Pressure: "/proc/pressure/cpu",
			Limit: &Limit{Path: "/docker/9c1e2f", Quota: 150 * time.Millisecond, Period: 100 * time.Millisecond, File: "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"}},
		stat: Stat{Periods: 8120, Throttled: 12, ThrottledTime: 204771200},
	}, {
		// /proc/PID/cgroup cut in the v2 line, the quota file without
		// its newline, cpu.stat cut: no limit is made up.
		fixture:   "truncated",
		want:      Group{Version: 1, Path: "/ndtest"},
		wantParse: true,
	}}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			fsys := os.DirFS("testdata/" + tt.fixture)
			g, err := Resolve(fsys, 1234)
			if errors.Is(err, ErrParse) != tt.wantParse {
				t.Fatalf("Resolve: %v, want a parse error: %v", err, tt.wantParse)
			}
			if diff := cmp.Diff(&tt.want, g, cmpopts.IgnoreUnexported(Group{})); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
			st, psi, err := g.Read(fsys)
			if tt.wantParse {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st != tt.stat {
				t.Errorf("Read: %+v, want %+v", st, tt.stat)
			}
			if psi == nil || psi.Some.Avg10 != tt.pressure {
				t.Errorf("pressure %+v, want some avg10 %v", psi, tt.pressure)
			}
		})
	}
}

func TestLimitString(t *testing.T) {
	for _, tt := range []struct {
		l    Limit
		want string
	}{
		{Limit{Quota: 20 * time.Millisecond, Period: 100 * time.Millisecond}, "0.2 CPU (20ms per 100ms period)"},
		{Limit{Quota: 150 * time.Millisecond, Period: 100 * time.Millisecond}, "1.5 CPUs (150ms per 100ms period)"},
	} {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.l, got, tt.want)
		}
	}
}

func TestParseStatV2Usage(t *testing.T) {
	// The v2 root of the hybrid host: no cpu controller, usage only.
	b, err := os.ReadFile("testdata/v1/sys/fs/cgroup/unified/cpu.stat")
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseStat(b)
	if err != nil || st != (Stat{}) {
		t.Errorf("ParseStat = %+v, %v; want no throttling, no error", st, err)
	}
	if _, err := procnet.ParsePressure([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")); err != nil {
		t.Fatal(err)
	}
}

func TestParseMax(t *testing.T) {
	for _, tt := range []struct {
		in            string
		quota, period time.Duration
		bad           bool
	}{
		{"max 100000\n", 0, 100 * time.Millisecond, false},
		{"20000 100000\n", 20 * time.Millisecond, 100 * time.Millisecond, false},
		{"20000 100000", 0, 0, true},
		{"20000\n", 0, 0, true},
		{"x 100000\n", 0, 100 * time.Millisecond, true},
		{"1000 0\n", 0, 0, true},
	} {
		q, p, err := ParseMax([]byte(tt.in))
		if q != tt.quota || p != tt.period || (err != nil) != tt.bad {
			t.Errorf("ParseMax(%q) = %v, %v, %v", tt.in, q, p, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"v1/proc/self/mountinfo", "odd/proc/self/mountinfo", "v1/proc/1234/cgroup", "odd/proc/1234/cgroup",
		"v1/sys/fs/cgroup/cpu/ndtest/cpu.stat", "v2/sys/fs/cgroup/system.slice/api.service/cpu.stat", "truncated/proc/1234/cgroup"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, err := range []error{
			func() error { _, err := parseMountinfo(b); return err }(),
			func() error { _, err := parseProcCgroup(b); return err }(),
			func() error { _, err := ParseStat(b); return err }(),
			func() error { _, _, err := ParseMax(b); return err }(),
		} {
			if err != nil && !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
		}
		if st, _ := ParseStat(b); st.ThrottledTime < 0 {
			t.Fatalf("negative throttled time %v", st.ThrottledTime)
		}
	})
}
