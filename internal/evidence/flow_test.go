package evidence

import "testing"

// TestFlowKey: a flow is the same whichever way its packets go, and a
// drop or a retransmission is of its client's flow when a conntrack
// table had it.
func TestFlowKey(t *testing.T) {
	f := Flow{Proto: "tcp", Src: "10.0.0.1:40000", Dst: "10.0.1.2:8080"}
	if f.Key() != f.Reverse().Key() {
		t.Errorf("%v and its reverse have keys %v and %v", f, f.Key(), f.Reverse().Key())
	}
	if (Flow{Proto: "udp", Src: f.Src, Dst: f.Dst}).Key() == f.Key() {
		t.Error("a UDP flow has a TCP flow's key")
	}
	orig := Flow{Proto: "tcp", Src: "10.0.0.1:40000", Dst: "10.9.0.80:80"}
	d := FlowDrop{Flow: f}
	if d.Client() != f {
		t.Errorf("Client() without a conntrack entry = %v, want the packet's flow", d.Client())
	}
	d.Orig = &orig
	r := Retrans{Local: "10.0.1.2:8080", Remote: "10.0.0.1:40000", Orig: &orig, Reply: true}
	if d.Client().Key() != r.Client().Key() || r.Flow().Key() != f.Key() {
		t.Errorf("the server's retransmission %v and its client's drop %v are not one flow", r.Client(), d.Client())
	}
	if (Retrans{Local: f.Src, Remote: f.Dst}).Client() != f {
		t.Errorf("Client() of a connection no table holds")
	}
}
