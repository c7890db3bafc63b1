package kubejob

import (
	"strings"
	"testing"
	"time"
)

// TestNew: the Job's name, its workers and its start are checked before
// anything is printed; the deadline covers the wait, the run and the
// slack, and every pod gets the same start and its own index.
func TestNew(t *testing.T) {
	now := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	ok := Spec{Name: "netdoctor-load", Workers: 4, Args: []string{"load", "-c", "8"}, Target: "http://svc/",
		StartAt: now.Add(time.Minute), Run: 32 * time.Second, Threads: 2, Connections: 2}
	j, err := New(ok, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Spec.ActiveDeadlineSeconds; got != 60+32+120 {
		t.Errorf("deadline %d s, want 212", got)
	}
	args := strings.Join(j.Spec.Template.Spec.Containers[0].Args, " ")
	if want := "load -c 8 --segment $(JOB_COMPLETION_INDEX)/4 --segment-base 0 --start-at 2026-11-28T17:01:00Z --json - http://svc/"; args != want {
		t.Errorf("args %q, want %q", args, want)
	}
	for name, s := range map[string]Spec{
		"no workers":  {Name: "a", Workers: 0, StartAt: ok.StartAt},
		"upper case":  {Name: "Load", Workers: 1, StartAt: ok.StartAt},
		"trailing -":  {Name: "load-", Workers: 1, StartAt: ok.StartAt},
		"too long":    {Name: strings.Repeat("a", 53), Workers: 1, StartAt: ok.StartAt},
		"start now":   {Name: "a", Workers: 1, StartAt: now},
		"empty name":  {Workers: 1, StartAt: ok.StartAt},
		"slash, dots": {Name: "a/b.c", Workers: 1, StartAt: ok.StartAt},
	} {
		if _, err := New(s, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
