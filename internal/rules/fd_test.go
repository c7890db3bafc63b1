package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// processes returns a change that replaces the processes of interest.
func processes(ps ...evidence.Process) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) { s.Processes = ps }
}

// worker is an nginx worker with the given descriptors and soft limit.
func worker(open int, soft uint64) evidence.Process {
	return evidence.Process{PID: 3677, Comm: "nginx", Threads: 1, OpenFDs: open, NofileSoft: soft, NofileHard: soft, Role: "listener :8080"}
}

var _ = addTable("checkFD", checkFD, fdCases)

func fdCases() []ruleCase {
	phpDefault := evidence.Process{PID: 200, Comm: "php-fpm8.2", OpenFDs: 30, NofileSoft: 1024, NofileHard: 524288, Role: "listener 127.0.0.1:9000"}
	client := evidence.Process{PID: 300, Comm: "wrk", OpenFDs: 30, NofileSoft: 1024, NofileHard: 524288, Role: "named"}
	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, nil),
		},
		{
			name:   "out of descriptors (fault 10)",
			bundle: bundle(processes(worker(40, 64)), processes(worker(65, 64))),
			want: []want{{ID: "fd-limit", Status: report.Active, Severity: report.Critical, Subject: "3677",
				Evidence: []string{"nginx pid 3677 (listener :8080): 65 open files, limit 64 (soft) / 64 (hard)"}}},
		},
		{
			name:   "peak in the first snapshot counts",
			bundle: bundle(processes(worker(64, 64)), processes(worker(10, 64))),
			want: []want{{ID: "fd-limit", Status: report.Active, Severity: report.Critical, Subject: "3677",
				Evidence: []string{"64 open files, limit 64 (soft)"}}},
		},
		{
			name:   "95% is critical",
			bundle: bundle(nil, processes(worker(95, 100))),
			want:   []want{{ID: "fd-limit", Status: report.Active, Severity: report.Critical, Subject: "3677", Evidence: []string{"95 open files, limit 100"}}},
		},
		{
			name:   "94% is a warning",
			bundle: bundle(nil, processes(worker(94, 100))),
			want:   []want{{ID: "fd-limit", Status: report.Active, Severity: report.Warning, Subject: "3677", Evidence: []string{"94 open files, limit 100"}}},
		},
		{
			name:   "80 of 100 is a warning",
			bundle: bundle(nil, processes(worker(80, 100))),
			want:   []want{{ID: "fd-limit", Status: report.Active, Severity: report.Warning, Subject: "3677", Evidence: []string{"80 open files, limit 100"}}},
		},
		{
			name:   "80% is a warning",
			bundle: bundle(nil, processes(worker(52430, 65535))),
			want:   []want{{ID: "fd-limit", Status: report.Active, Severity: report.Warning, Subject: "3677", Evidence: []string{"52430 open files, limit 65535"}}},
		},
		{
			name:   "79% of a large limit",
			bundle: bundle(nil, processes(worker(51772, 65535))),
		},
		{
			name:   "a listener with the 1024 default (latent)",
			bundle: bundle(nil, processes(phpDefault)),
			want: []want{{ID: "fd-limit", Status: report.Latent, Severity: report.Info, Subject: "200",
				Evidence: []string{"php-fpm8.2 pid 200 (listener 127.0.0.1:9000): 30 open files, limit 1024 (soft) / 524288 (hard)"}}},
		},
		{
			name:   "79% of a small limit is only latent",
			bundle: bundle(nil, processes(worker(79, 100))),
			want:   []want{{ID: "fd-limit", Status: report.Latent, Severity: report.Info, Subject: "3677", Evidence: []string{"79 open files, limit 100"}}},
		},
		{
			name:   "a client with the 1024 default",
			bundle: bundle(nil, processes(client)),
		},
		{
			name:   "unlimited",
			bundle: bundle(nil, processes(worker(1e6, 0))),
		},
		{
			name:   "each process once",
			bundle: bundle(processes(worker(64, 64), phpDefault), processes(phpDefault, worker(64, 64))),
			want: []want{
				{ID: "fd-limit", Status: report.Active, Severity: report.Critical, Subject: "3677", Evidence: []string{"nginx pid 3677"}},
				{ID: "fd-limit", Status: report.Latent, Severity: report.Info, Subject: "200", Evidence: []string{"php-fpm8.2 pid 200"}},
			},
		},
		{
			name:   "host near fs.file-max",
			bundle: bundle(nil, setSysctl("fs.file-nr", "900000 0 1000000")),
			want: []want{{ID: "fd-limit", Status: report.Active, Severity: report.Critical, Subject: "fs.file-max",
				Evidence: []string{"fs.file-nr: 900000 allocated of 1000000"}}},
		},
		{
			name:   "host at 79% of fs.file-max",
			bundle: bundle(nil, setSysctl("fs.file-nr", "790000 0 1000000")),
		},
		{
			name:   "malformed fs.file-nr",
			bundle: bundle(nil, setSysctl("fs.file-nr", "900000 1000000")),
		},
		{
			name:   "no sysctls, no processes",
			bundle: bundle(nil, func(s *evidence.Snapshot) { s.Sysctls, s.Processes = nil, nil }),
		},
		{
			name:   "one snapshot",
			bundle: single(processes(worker(64, 64))),
			want:   []want{{ID: "fd-limit", Status: report.Active, Severity: report.Critical, Subject: "3677", Evidence: []string{"64 open files"}}},
		},
	}
}

func TestCheckFD(t *testing.T) {
	runCases(t, "checkFD", checkFD, fdCases())
}

// TestFDLatentIsStatic checks that a limit that has not been reached is
// not presented as observed during the window.
func TestFDLatentIsStatic(t *testing.T) {
	got := checkFD(on(bundle(nil, processes(evidence.Process{PID: 200, Comm: "php-fpm8.2", OpenFDs: 30, NofileSoft: 1024, Role: "listener :9000"}))))
	if len(got) != 1 {
		t.Fatalf("checkFD(on()) = %v, want one finding", keys(got))
	}
	if got[0].Evidence[0].Window {
		t.Errorf("checkFD(on()) latent evidence %q has Window = true", got[0].Evidence[0].Text)
	}
}

// TestFileMaxFix checks that fs.file-max, a global setting, is raised to
// four times its value as in the initial namespace, whatever namespace
// was observed.
func TestFileMaxFix(t *testing.T) {
	got := checkFD(on(inNetNS(bundle(nil, setSysctl("fs.file-nr", "900000 0 1000000")), "feas-srv")))
	if len(got) != 1 {
		t.Fatalf("checkFD(on()) = %v, want one finding", keys(got))
	}
	want := sysctlFix(bundle(nil, nil), "fs.file-max", "4000000").Lines
	if diff := cmp.Diff(want, fixOf(got[0])); diff != "" {
		t.Errorf("checkFD(on()) fix mismatch (-want +got):\n%s", diff)
	}
}
