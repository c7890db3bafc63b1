package cli

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/load"
)

// TestLoadArgs: a load rendered as run's flags (how `lab list -v` shows
// a scenario's load, and how the lab tests type it) is parsed by run's
// own flags back into the same options: a renamed flag fails here, not
// in a lab at run time.
func TestLoadArgs(t *testing.T) {
	cases := []load.Options{
		{Connections: 50, Threads: 1, Duration: 5 * time.Second},
		{Requests: 300, Rate: 12.5, Timeout: 1500 * time.Millisecond, NoKeepAlive: true, Method: "POST",
			Header: []string{"X-A: 1", "X-B: 2"}, Body: []byte("a=1"), Duration: time.Minute},
		{Ramp: &load.Ramp{From: 10, To: 100, Over: 30 * time.Second}},
		{Connections: 5, Engine: load.EngineEpoll},
	}
	for _, sc := range lab.Scenarios {
		cases = append(cases, sc.Load)
	}
	for _, o := range cases {
		args := loadArgs(o)
		fs := newFlags("run", io.Discard)
		lo := loadFlags(fs)
		pos, err := parse(fs, splitShort(args, wrkShort), io.Discard)
		if err != nil || len(pos) != 0 {
			t.Errorf("%q: %v, %q left", args, err, pos)
			continue
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if err := lo.check(set); err != nil {
			t.Errorf("%q: %v", args, err)
			continue
		}
		// The flags' defaults are load's own.
		want := o
		if want.Method == "" {
			want.Method = "GET"
		}
		if want.Connections == 0 {
			want.Connections = 10
		}
		if want.Threads == 0 {
			want.Threads = 2
		}
		if want.Timeout == 0 {
			want.Timeout = 2 * time.Second
		}
		if !reflect.DeepEqual(lo.o, want) {
			t.Errorf("run %s\nparsed %+v\n  want %+v", strings.Join(args, " "), lo.o, want)
		}
	}
}
