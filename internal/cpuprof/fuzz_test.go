package cpuprof

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzSummarize: a run bundle's profile comes from another host; its
// pprof bytes are read with pprof's own parser, then summed up and made
// into a flame graph's tree, whatever they hold.
func FuzzSummarize(f *testing.F) {
	b, err := os.ReadFile("testdata/nginx.pprof")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := &Profile{Hz: 99, Samples: 10, PProf: b}
		sum, err := Summarize(p)
		if err == nil && sum == nil {
			t.Fatal("no summary and no error")
		}
		if root, err := Flame(p); err == nil && root == nil {
			t.Fatal("no tree and no error")
		}
	})
}

// TestSummarizeSeed000 reads a real profile of seed 000's fifth stage:
// nginx opens a connection per request to php-fpm, and its samples show
// connection setup with the kernel's port search under it.
func TestSummarizeSeed000(t *testing.T) {
	b, err := os.ReadFile("testdata/nginx.pprof")
	if err != nil {
		t.Fatal(err)
	}
	p := &Profile{Hz: 99, Samples: 990, PProf: b}
	sum, err := Summarize(p)
	if err != nil {
		t.Fatal(err)
	}
	var nginx *ServerSummary
	for i, s := range sum.Servers {
		if strings.HasPrefix(s.Server, "nginx ") {
			nginx = &sum.Servers[i]
		}
	}
	if nginx == nil || nginx.KernelShare < 0.5 || len(nginx.Top) == 0 {
		t.Fatalf("nginx's part: %+v", sum.Servers)
	}
	kinds := map[Kind]float64{}
	for _, a := range nginx.Activities {
		kinds[a.Kind] = a.Share
	}
	if kinds[TCPConnect] < 0.02 || kinds[NetReceive] < 0.1 {
		t.Errorf("nginx's activities %+v", nginx.Activities)
	}
	root, err := Flame(p)
	if err != nil {
		t.Fatal(err)
	}
	var find func(n *Node, name string) *Node
	find = func(n *Node, name string) *Node {
		if n.Name == name {
			return n
		}
		for _, c := range n.Children {
			if f := find(c, name); f != nil {
				return f
			}
		}
		return nil
	}
	if n := find(root, "__inet_hash_connect"); n == nil || n.Value == 0 {
		t.Errorf("no port search in the flame graph")
	}
}

// TestWithoutKernelAddresses: a profile served over the agent's API
// names its kernel frames but does not place them (KASLR): every
// kernel address is zero, every name and the summary the same.
func TestWithoutKernelAddresses(t *testing.T) {
	b, err := os.ReadFile("testdata/nginx.pprof")
	if err != nil {
		t.Fatal(err)
	}
	p := &Profile{Hz: 99, Samples: 990, PProf: b}
	q, err := p.WithoutKernelAddresses()
	if err != nil {
		t.Fatal(err)
	}
	kernel := func(p *Profile) (placed int, names []string) {
		pp, err := p.Parse()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range pp.Location {
			if l.Mapping == nil || l.Mapping.File != KernelModule {
				continue
			}
			if l.Address != 0 || l.Mapping.Start != 0 || l.Mapping.Limit != 0 {
				placed++
			}
			if len(l.Line) > 0 {
				names = append(names, l.Line[0].Function.Name)
			}
		}
		return placed, names
	}
	before, names := kernel(p)
	after, kept := kernel(q)
	if before == 0 || len(names) == 0 {
		t.Fatalf("the fixture has no kernel frame placed (%d) or named (%d)", before, len(names))
	}
	if after != 0 || !slices.Equal(names, kept) {
		t.Errorf("%d kernel frames still placed; names %d → %d", after, len(names), len(kept))
	}
	s1, _ := Summarize(p)
	s2, _ := Summarize(q)
	if !reflect.DeepEqual(s1, s2) {
		t.Errorf("the summary changed:\n%+v\n%+v", s1, s2)
	}
}
