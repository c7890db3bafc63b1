package sizing

import (
	"fmt"
	"testing"
)

// TestSizing pins each formula on the values the lab's seeds produce and
// on its edges: unknown inputs, the floors and the caps.
func TestSizing(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want string
	}{
		// Seed 000: 200 connections over nginx's 2 workers.
		{"keepalive seed 000", fmt.Sprint(Keepalive(200, 2)), "128"},
		{"keepalive unknown load", fmt.Sprint(Keepalive(0, 4)), "16"},
		{"keepalive few", fmt.Sprint(Keepalive(20, 2)), "16"},
		{"keepalive capped", fmt.Sprint(Keepalive(10000, 1)), "128"},
		{"keepalive no workers", fmt.Sprint(Keepalive(100, 0)), "128"},
		{"keepalive odd share", fmt.Sprint(Keepalive(100, 3)), "64"}, // 34 → 64
		// pm.max_children: 200 in flight, an eighth spare, the status page.
		{"pool seed 000", fmt.Sprint(Pool(200, 5)), "226 25"},
		{"pool small", fmt.Sprint(Pool(10, 2)), "15 4"},
		{"pool never shrinks below twice", fmt.Sprint(Pool(10, 40)), "80 4"},
		{"pool unknown load", fmt.Sprint(Pool(0, 5)), "15 4"},
		// Ports: 1300 connections/s × 60 s × 1.25 = 97500, more than any
		// range: the widest. With tw_reuse, 1625: the default width.
		{"ports seed 000", fmt.Sprint(Ports(1300, PortHold(false), 51)), "97500 10000 65535 true"},
		{"ports tw_reuse", fmt.Sprint(Ports(1300, PortHold(true), 51)), "1625 37000 65535 true"},
		{"ports default range holds", fmt.Sprint(Ports(100, 60, 28232)), "7500 0 0 false"},
		{"ports default range short", fmt.Sprint(Ports(500, 60, 28232)), "37500 28000 65535 true"},
		{"ports no rate", fmt.Sprint(Ports(0, 60, 28232)), "0 0 0 false"},
		// Backlog: 200 at once; 5000/s for 300 ms.
		{"backlog burst", fmt.Sprint(Backlog(200, 1000, 0.01)), "4096 200"},
		{"backlog rate × p99", fmt.Sprint(Backlog(200, 5000, 0.3)), "4096 1500"},
		{"backlog above the default", fmt.Sprint(Backlog(3000, 0, 0)), "8192 3000"},
		{"backlog capped", fmt.Sprint(Backlog(0, 1e6, 1)), "65535 1e+06"},
		// Conntrack: 1000/s × 120 s × 1.25 = 150000 → 262144; the hash's
		// buckets a floor; a full table of 200 needs only the floor.
		{"conntrack rate", fmt.Sprint(Conntrack(1000, 120, 200, 1024)), "262144 150000"},
		{"conntrack buckets floor", fmt.Sprint(Conntrack(0, 120, 200, 262144)), "262144 0"},
		{"conntrack minimum", fmt.Sprint(Conntrack(0, 120, 200, 1024)), "65536 0"},
		{"conntrack peak", fmt.Sprint(Conntrack(0, 120, 300000, 262144)), "1048576 0"},
		// worker_connections: 200 clients over 2 workers, an upstream each.
		{"worker_connections", fmt.Sprint(WorkerConnections(200, 2)), "512 200"},
		{"worker_connections no workers", fmt.Sprint(WorkerConnections(10, 0)), "64 20"},
		// Neighbour tables: four times the hard limit, at least 8192, in
		// the kernel's ratios (128/512/1024 by default).
		{"neighbour default", fmt.Sprint(Neighbour(1024)), "1024 4096 8192"},
		{"neighbour large", fmt.Sprint(Neighbour(5000)), "4096 16384 32768"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
}

func TestNextPow2(t *testing.T) {
	for n, want := range map[int]int{-5: 1, 0: 1, 1: 1, 2: 2, 3: 4, 511: 512, 512: 512, 513: 1024} {
		if got := NextPow2(n); got != want {
			t.Errorf("NextPow2(%d) = %d, want %d", n, got, want)
		}
	}
}
