package procnet

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

func TestProcess(t *testing.T) {
	tests := []struct {
		name      string
		p         Proc
		pid       int
		want      kernel.Process
		wantParse bool
		wantIs    error // a read error the result must wrap
	}{{
		name: "host",
		p:    fixture("host"),
		pid:  1234,
		want: kernel.Process{
			PID: 1234, PPID: 1, State: "S", Comm: "python3", Threads: 1, OpenFDs: 29,
			NofileSoft: 20000, NofileHard: 20000, UTime: 5, STime: 0, StartTime: 22654,
		},
	}, {
		name: "odd comm and unlimited files",
		p:    fixture("odd"),
		pid:  4321,
		want: kernel.Process{
			PID: 4321, PPID: 1, State: "S", Comm: "my (weird) proc", Threads: 7, OpenFDs: 5, UTime: 5, StartTime: 22654,
		},
	}, {
		name: "truncated stat and no fd directory",
		p:    fixture("truncated"),
		pid:  1234,
		want: kernel.Process{
			PID: 1234, Comm: "python3", Threads: 1, OpenFDs: -1,
			NofileSoft: 20000, NofileHard: 20000,
		},
		wantParse: true,
		wantIs:    fs.ErrNotExist,
	}, {
		name: "fd directory not readable",
		p: Proc{FS: errFS{FS: fixture("host").FS, errs: map[string]error{
			"1234/fd": fs.ErrPermission,
		}}},
		pid: 1234,
		want: kernel.Process{
			PID: 1234, PPID: 1, State: "S", Comm: "python3", Threads: 1, OpenFDs: -1,
			NofileSoft: 20000, NofileHard: 20000, UTime: 5, StartTime: 22654,
		},
		wantIs: fs.ErrPermission,
	}, {
		name: "status and limits not readable",
		p: Proc{FS: errFS{FS: fixture("host").FS, errs: map[string]error{
			"1234/status": fs.ErrPermission,
			"1234/limits": fs.ErrPermission,
		}}},
		pid:    1234,
		want:   kernel.Process{PID: 1234, PPID: 1, State: "S", Comm: "python3", OpenFDs: 29, UTime: 5, StartTime: 22654},
		wantIs: fs.ErrPermission,
	}, {
		name:   "gone",
		p:      fixture("host"),
		pid:    999,
		want:   kernel.Process{PID: 999},
		wantIs: fs.ErrNotExist,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.Process(tt.pid)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Process(%d) mismatch (-want +got):\n%s", tt.pid, diff)
			}
			if errors.Is(err, ErrParse) != tt.wantParse {
				t.Errorf("Process(%d) error = %v, want wrapping ErrParse: %v", tt.pid, err, tt.wantParse)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Process(%d) error = %v, want wrapping %v", tt.pid, err, tt.wantIs)
			}
			if tt.wantIs == nil && !tt.wantParse && err != nil {
				t.Errorf("Process(%d) error = %v, want nil", tt.pid, err)
			}
		})
	}
}

func TestParsePIDStat(t *testing.T) {
	const tail = " S 1 2 3 0 -1 4194560 10 0 0 0 17 4 0 0 20 0 1 0 22654 18567168 3639\n"
	tests := []struct {
		name      string
		in        string
		want      kernel.Process
		wantParse bool
	}{
		{"plain", "42 (nginx)" + tail, kernel.Process{PID: 42, PPID: 1, State: "S", Comm: "nginx", UTime: 17, STime: 4, StartTime: 22654}, false},
		{"spaces and parentheses", "7 (a) b (c))" + tail, kernel.Process{PID: 7, PPID: 1, State: "S", Comm: "a) b (c)", UTime: 17, STime: 4, StartTime: 22654}, false},
		{"newline in comm", "7 (a\nb)" + tail, kernel.Process{PID: 7, PPID: 1, State: "S", Comm: "a\nb", UTime: 17, STime: 4, StartTime: 22654}, false},
		{"empty comm", "7 ()" + tail, kernel.Process{PID: 7, PPID: 1, State: "S", UTime: 17, STime: 4, StartTime: 22654}, false},
		{"no parentheses", "7 nginx" + tail, kernel.Process{}, true},
		{"parentheses reversed", "7 )nginx(" + tail, kernel.Process{}, true},
		{"bad pid", "x (nginx)" + tail, kernel.Process{PPID: 1, State: "S", Comm: "nginx", UTime: 17, STime: 4, StartTime: 22654}, true},
		{"too few fields", "7 (nginx) S 1 2 3 0 -1 4194560 10 0 0 0 17 4\n", kernel.Process{PID: 7, Comm: "nginx"}, true},
		{"cut inside starttime", "7 (nginx) S 1 2 3 0 -1 4194560 10 0 0 0 17 4 0 0 20 0 1 0 226\n", kernel.Process{PID: 7, Comm: "nginx"}, true},
		{"bad starttime", "7 (nginx) S 1 2 3 0 -1 4194560 10 0 0 0 17 4 0 0 20 0 1 0 x 18567168 3639\n", kernel.Process{PID: 7, PPID: 1, State: "S", Comm: "nginx", UTime: 17, STime: 4}, true},
		{"bad utime", "7 (nginx) S 1 2 3 0 -1 4194560 10 0 0 0 x 4 0 0 20 0 1 0 22654 18567168 3639\n", kernel.Process{PID: 7, PPID: 1, State: "S", Comm: "nginx", STime: 4, StartTime: 22654}, true},
		{"bad ppid", "7 (nginx) D x 2 3 0 -1 4194560 10 0 0 0 17 4 0 0 20 0 1 0 22654 18567168 3639\n", kernel.Process{PID: 7, State: "D", Comm: "nginx", UTime: 17, STime: 4, StartTime: 22654}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePIDStat([]byte(tt.in))
			checkErr(t, "parsePIDStat()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parsePIDStat() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePIDStatusAndLimits(t *testing.T) {
	threads, err := parsePIDStatus([]byte("Name:\tx\nThreads:\t12\nSigQ:\t0/1\n"))
	if threads != 12 || err != nil {
		t.Errorf("parsePIDStatus() = %d, %v, want 12, nil", threads, err)
	}
	for _, in := range []string{"Name:\tx\n", "Threads:\t1", "Threads:\tx\n"} {
		if _, err := parsePIDStatus([]byte(in)); !errors.Is(err, ErrParse) {
			t.Errorf("parsePIDStatus(%q) error = %v, want ErrParse", in, err)
		}
	}

	tests := []struct {
		in         string
		soft, hard uint64
		wantParse  bool
	}{
		{"Max open files            1024                 524288               files     \n", 1024, 524288, false},
		{"Max open files            unlimited            unlimited            files     \n", 0, 0, false},
		{"Max open files            1024                 unlimited            files     \n", 1024, 0, false},
		{"Max open files            x                    4096                 files     \n", 0, 4096, true},
		{"Max processes             1024                 1024                 processes \n", 0, 0, true},
		{"Max open files            1024                 52", 0, 0, true},
	}
	for _, tt := range tests {
		soft, hard, err := parsePIDLimits([]byte(tt.in))
		if soft != tt.soft || hard != tt.hard || errors.Is(err, ErrParse) != tt.wantParse {
			t.Errorf("parsePIDLimits(%q) = %d, %d, %v; want %d, %d, ErrParse %v", tt.in, soft, hard, err, tt.soft, tt.hard, tt.wantParse)
		}
	}
}

func TestCountFDs(t *testing.T) {
	// Since Linux 6.2 the size of PID/fd is the number of open files; a
	// size of 0 (older kernels) means the names must be counted.
	fsys := fstest.MapFS{
		"1/fd":   {Mode: fs.ModeDir | 0o500, Data: make([]byte, 1000)},
		"1/fd/0": {},
		"2/fd":   {Mode: fs.ModeDir | 0o500},
		"2/fd/0": {},
		"2/fd/1": {},
	}
	tests := []struct {
		name    string
		inSize  bool
		dir     string
		wantFDs int
	}{
		{"size trusted", true, "1/fd", 1000},
		{"size ignored", false, "1/fd", 1},
		{"size 0 falls back to names", true, "2/fd", 2},
	}
	for _, tt := range tests {
		p := Proc{FS: fsys, FDCountInSize: tt.inSize}
		got, err := p.countFDs(tt.dir)
		if err != nil || got != tt.wantFDs {
			t.Errorf("%s: countFDs(%q) = %d, %v, want %d, nil", tt.name, tt.dir, got, err, tt.wantFDs)
		}
	}
}
