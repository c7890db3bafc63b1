package procnet

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSchedstat(t *testing.T) {
	tests := []struct {
		fixture, task string
		want          Schedstat
		wantParse     bool
	}{
		{"host", "1234/task/1234", Schedstat{OnCPU: 183756765, RunDelay: 13744037, Slices: 424}, false},
		// A spinning thread in a cgroup with a 20 % quota, read after 3 s.
		{"busy", "1234/task/1235", Schedstat{OnCPU: 298054012, RunDelay: 2753781749, Slices: 149}, false},
		{"odd", "1234/task/1234", Schedstat{}, false}, // a task that never ran
		{"truncated", "1234/task/1234", Schedstat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			got, err := fixture(tt.fixture).Schedstat(tt.task)
			if errors.Is(err, ErrParse) != tt.wantParse {
				t.Fatalf("err = %v, want parse error %v", err, tt.wantParse)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Schedstat (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPressure(t *testing.T) {
	tests := []struct {
		fixture, resource string
		want              Pressure
		wantParse         bool
	}{
		{"host", "cpu", Pressure{
			Some:    PressureLine{Avg10: 37.42, Avg60: 32.38, Avg300: 23.16, Total: 115231838 * time.Microsecond},
			HasFull: true,
		}, false},
		{"host", "io", Pressure{
			Some:    PressureLine{Avg10: 0.01, Avg60: 0.35, Avg300: 0.60, Total: 5206790 * time.Microsecond},
			Full:    PressureLine{Avg60: 0.20, Avg300: 0.41, Total: 3782269 * time.Microsecond},
			HasFull: true,
		}, false},
		// Before 5.13 the system-wide cpu file has no full line.
		{"odd", "cpu", Pressure{}, false},
		{"truncated", "cpu", Pressure{Some: PressureLine{Avg10: 0.01, Avg60: 0.35, Avg300: 0.60, Total: 5206790 * time.Microsecond}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+"/"+tt.resource, func(t *testing.T) {
			got, err := fixture(tt.fixture).Pressure(tt.resource)
			if errors.Is(err, ErrParse) != tt.wantParse {
				t.Fatalf("err = %v, want parse error %v", err, tt.wantParse)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Pressure (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseSchedstat(f *testing.F) {
	addSeeds(f, "host/1234/task/1234/schedstat", "busy/1234/task/1235/schedstat", "truncated/1234/task/1234/schedstat")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseSchedstat(b)
		checkFuzzErr(t, err)
		if s.OnCPU < 0 || s.RunDelay < 0 {
			t.Fatalf("negative times: %+v", s)
		}
	})
}

func FuzzParsePressure(f *testing.F) {
	addSeeds(f, "host/pressure/cpu", "host/pressure/io", "odd/pressure/cpu", "truncated/pressure/cpu")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePressure(b)
		checkFuzzErr(t, err)
		if p.Some.Total < 0 || p.Full.Total < 0 {
			t.Fatalf("negative totals: %+v", p)
		}
	})
}

func TestStatCPU(t *testing.T) {
	got, err := fixture("host").StatCPU("1234")
	if err != nil {
		t.Fatal(err)
	}
	// host/1234/stat: utime 5, stime 0, and processor 1 (field 39).
	if want := (StatCPU{Comm: "python3", UTime: 5, Processor: 1}); got != want {
		t.Errorf("StatCPU = %+v, want %+v", got, want)
	}
	if _, err := fixture("truncated").StatCPU("1234"); !errors.Is(err, ErrParse) {
		t.Errorf("truncated: err %v, want a parse error", err)
	}
}
