package tune

import "testing"

func TestPersistContent(t *testing.T) {
	set := []Sysctl{{Name: "net.netfilter.nf_conntrack_max", Proposed: "262144"}, {Name: "net.core.somaxconn", Proposed: "4096"}}
	got := string(persistContent(nil, false, set))
	want := "# Written by netdoctor tune apply --persist; `netdoctor tune rollback` restores the previous state.\n" +
		"net.core.somaxconn = 4096\nnet.netfilter.nf_conntrack_max = 262144\n"
	if got != want {
		t.Errorf("new file:\n%s\nwant\n%s", got, want)
	}
	// An existing file: other keys and comments stay, earlier lines for
	// these keys go, a missing final newline is mended.
	old := "# mine\nvm.swappiness = 10\nnet.core.somaxconn=128\n# net.core.somaxconn = 5\nfs.file-max = 100000"
	got = string(persistContent([]byte(old), true, set))
	want = "# mine\nvm.swappiness = 10\n# net.core.somaxconn = 5\nfs.file-max = 100000\nnet.core.somaxconn = 4096\nnet.netfilter.nf_conntrack_max = 262144\n"
	if got != want {
		t.Errorf("existing file:\n%s\nwant\n%s", got, want)
	}
	// Written again: the same bytes.
	if again := string(persistContent([]byte(got), true, set)); again != got {
		t.Errorf("not idempotent:\n%s", again)
	}
}
