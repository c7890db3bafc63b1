package cpuprof

import (
	"os"
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
