package tune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/sysctl"
)

// TestTry: the one verification workflow measures before and after the
// plan with the plan applied in between, compares while it is applied,
// and puts the setting back on every way out (a failed measurement, a
// cancelled one) unless told to keep it, and then says how to undo it.
func TestTry(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a network namespace")
	}
	jdir := useJournalDir(t)
	name := fmt.Sprintf("ndtest-try-%d", os.Getpid())
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.Delete(name) })
	const key = "net.core.somaxconn"
	if err := sysctl.Write(ns, key, "4096"); err != nil {
		t.Fatal(err)
	}
	plan := &Plan{Version: Version, Changes: []Change{{Kind: KindSysctl, Key: "sysctl:" + key,
		Sysctl: &Sysctl{Name: key, Current: "4096", Proposed: "8192", Scope: Scope{NetNS: name, NetNSInode: ns.Inode}}}}}
	read := func() string {
		t.Helper()
		v, err := sysctl.Read(ns, key)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// measure reads the setting, as a load would feel it; fail makes
	// the step named so fail.
	measure := func(fail string, ctx context.Context, step string) (string, error) {
		if step == fail {
			return "", fmt.Errorf("%s: %w", step, errors.ErrUnsupported)
		}
		return read(), ctx.Err()
	}
	trial := func(fail string, keep bool, out *bytes.Buffer) Trial[string] {
		return Trial[string]{
			Measure: func(ctx context.Context, step string) (string, error) { return measure(fail, ctx, step) },
			Compare: func(before, after string) error {
				fmt.Fprintf(out, "compared %s → %s while %s\n", before, after, read())
				return nil
			},
			Does: "measure", Keep: keep, CanKeep: true, Out: out,
		}
	}

	var out bytes.Buffer
	tr, err := Try(context.Background(), plan, "plan.json", trial("", false, &out))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Before != "4096" || tr.After != "8192" || tr.Journal != "" || read() != "4096" {
		t.Errorf("measured %s → %s, journal %q, now %s: want 4096 → 8192 and the setting back", tr.Before, tr.After, tr.Journal, read())
	}
	lines := []string{"Verifying plan.json (1 changes): measure, apply, measure again with the same load, roll back",
		"2/3 applying plan.json", "compared 4096 → 8192 while 8192", "Rolling back (--keep keeps the changes):", "4096 restored"}
	at := 0
	for _, l := range lines {
		i := strings.Index(out.String()[at:], l)
		if i < 0 {
			t.Fatalf("no %q after what came before, in:\n%s", l, out.String())
		}
		at += i + len(l)
	}
	if js, _ := os.ReadDir(jdir); len(js) != 0 {
		t.Errorf("journals left after the rollback: %v", js)
	}

	// The second measurement fails, or is cancelled: the setting is back
	// all the same, and its error comes out as it was.
	out.Reset()
	if _, err := Try(context.Background(), plan, "plan.json", trial("3/3 after", false, &out)); !errors.Is(err, errors.ErrUnsupported) || read() != "4096" {
		t.Errorf("after a failed measurement: %v, setting %s; want the measurement's error and 4096", err, read())
	}
	ctx, cancel := context.WithCancel(context.Background())
	tc := trial("", false, &out)
	tc.Measure = func(ctx context.Context, step string) (string, error) {
		if strings.HasPrefix(step, "3/3") {
			cancel()
		}
		return measure("", ctx, step)
	}
	if _, err := Try(ctx, plan, "plan.json", tc); !errors.Is(err, context.Canceled) || read() != "4096" {
		t.Errorf("after Ctrl-C: %v, setting %s; want context.Canceled and 4096", err, read())
	}

	// Kept: the setting stays, and the journal that undoes it is named.
	out.Reset()
	tr, err = Try(context.Background(), plan, "plan.json", trial("", true, &out))
	if err != nil {
		t.Fatal(err)
	}
	if read() != "8192" || tr.Journal == "" || !strings.Contains(out.String(), "Changes kept. Undo: netdoctor tune rollback "+tr.Journal) {
		t.Errorf("kept: setting %s, journal %q:\n%s", read(), tr.Journal, out.String())
	}
	j, err := ReadJournal(tr.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if err := Rollback(j, &out); err != nil || read() != "4096" {
		t.Errorf("rollback of the kept changes: %v, setting %s", err, read())
	}
}
