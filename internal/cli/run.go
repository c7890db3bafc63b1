package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/run"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	lo := loadFlags(fs)
	var o run.Options
	serverNS := fs.String("server-netns", "", "the server's network namespace (name or path); default: this one when the target is local")
	durationVar(fs, &o.Baseline, "baseline", 3*time.Second, "quiet time sampled before the load")
	durationVar(fs, &o.Tail, "tail", 2*time.Second, "time sampled after the load")
	dns := fs.Bool("dns", false, "also probe the configured nameservers once per side")
	htmlOut := fs.String("html", "", "also write a self-contained HTML report with per-second charts to this file")
	verify := fs.String("verify-with", "", "measure, apply this tune plan (kernel settings and configuration), measure again with the same load, then roll back")
	keep := fs.Bool("keep", false, "with --verify-with: keep the changes instead of rolling back")
	bundleOut := fs.String("bundle", "", "also write the run's evidence (both sides' snapshots, the load, the servers) to this file, gzip'd if it ends in .gz; `netdoctor diagnose` reads it back")
	pos, err := parse(fs, splitShort(args, "ctdnRHm"), stderr)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badInput("run needs exactly one URL, e.g. netdoctor run -c 50 -d 10s http://127.0.0.1:8080/")
	}
	lo.o.URL = pos[0]
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := lo.check(set); err != nil {
		return err
	}
	if o.Baseline < 0 || o.Tail < 0 {
		return badInput("--baseline and --tail must not be negative")
	}
	if o.Baseline == 0 && set["baseline"] {
		o.Baseline = time.Millisecond
	}
	o.DNS = *dns
	if o.ServerNetNS, err = netns.Resolve(*serverNS); err != nil {
		return err
	}
	if *keep && *verify == "" {
		return badInput("--keep goes with --verify-with")
	}
	if *verify != "" {
		return runVerify(ctx, o, lo, set, *verify, *keep, stdout, stderr)
	}
	p := newProgress(stderr, lo.o.Duration, set["d"] || lo.o.Requests == 0)
	lo.o.OnSecond = p.second
	lo.o.OnStart = func() {
		fmt.Fprintf(stdout, "Running %s test @ %s, sampling %s every second\n", describe(lo.o), lo.o.URL, sidesText(o.ServerNetNS.String()))
	}
	o.Load = lo.o
	res, err := run.Run(ctx, o)
	p.done()
	if err != nil {
		return runErr(err)
	}
	r := res.Report()
	if lo.jsonOut != "-" {
		if err := writeRunText(stdout, r, lo.latency); err != nil {
			return err
		}
	}
	if lo.jsonOut != "" {
		if err := writeRunJSON(lo.jsonOut, stdout, r); err != nil {
			return err
		}
	}
	if *htmlOut != "" {
		if err := writeRunHTML(*htmlOut, stdout, r, res); err != nil {
			return err
		}
		if lo.jsonOut != "-" && *htmlOut != "-" {
			fmt.Fprintf(stdout, "HTML report: %s\n", *htmlOut)
		}
	}
	if *bundleOut != "" {
		if err := writeOut(*bundleOut, stdout, "bundle", gzipped(*bundleOut, indentedJSON(res.Bundle()))); err != nil {
			return err
		}
	}
	return runExit(r)
}

// runExit is run's exit: errFindings for an active critical finding.
func runExit(r *run.Report) error {
	for _, f := range r.Findings {
		if f.Status == report.Active && f.Severity == report.Critical {
			return errFindings
		}
	}
	return nil
}

func sidesText(serverNS string) string {
	if serverNS != "" {
		return "the server (netns " + serverNS + ") and this client"
	}
	return "this namespace (client, and server if local)"
}

// runErr marks the run errors that are the user's input: a bad URL, a
// name that does not resolve, a port nobody listens on.
func runErr(err error) error {
	if errors.Is(err, load.ErrInvalid) || errors.Is(err, load.ErrResolve) || errors.Is(err, run.ErrNotListening) {
		return usageError{err}
	}
	return err
}

func writeRunText(w io.Writer, r *run.Report, latency bool) error {
	if err := report.Text(w, r.Report); err != nil {
		return err
	}
	for _, s := range r.Sides {
		if !s.Observed {
			fmt.Fprintf(w, "\n%s side not observed: %s\n", s.Name, s.Why)
		}
	}
	writeServers(w, r.Servers)
	fmt.Fprintf(w, "\nThroughput over time: %s\n", r.Shape.Text)
	fmt.Fprintf(w, "\nLoad:\n")
	return writeLoad(w, r.Load, latency)
}

func writeRunJSON(path string, stdout io.Writer, r *run.Report) error {
	return writeOut(path, stdout, "report", indentedJSON(r))
}

// writeServers lists the applications found behind the port: what they
// are, the limits their configuration sets, and what their logs said.
func writeServers(w io.Writer, servers []*app.Server) {
	if len(servers) == 0 {
		return
	}
	fmt.Fprintf(w, "\nServers:\n")
	for _, s := range servers {
		fmt.Fprintf(w, "  %s %s on %s", s.Role, s.Kind, s.Addr)
		if s.Master != 0 {
			fmt.Fprintf(w, " (master %d, %d other processes)", s.Master, len(s.PIDs)-1)
		}
		if s.Config != "" {
			fmt.Fprintf(w, ", config %s", s.Config)
		}
		fmt.Fprintln(w)
		if n := s.Nginx; n != nil {
			fmt.Fprintf(w, "    worker_processes %s, worker_connections %s", n.WorkerProcesses, n.WorkerConnections)
			if n.WorkerRlimitNofile.Value > 0 {
				fmt.Fprintf(w, ", worker_rlimit_nofile %s", n.WorkerRlimitNofile)
			}
			fmt.Fprintln(w)
			for _, u := range n.Upstreams {
				reuse := "connections reused"
				if !u.Reuse {
					reuse = "a new connection per request: " + u.Why
				}
				fmt.Fprintf(w, "    %s %s (%s): %s\n", u.Pass, u.Target, u.PassSource, reuse)
			}
		}
		if p := s.Pool; p != nil {
			fmt.Fprintf(w, "    php-fpm pool %s: pm %s, pm.max_children %s, listen.backlog %s\n", p.Name, p.PM, p.MaxChildren, p.Backlog)
		}
		for _, l := range s.Logs {
			fmt.Fprintf(w, "    %s log %s: %d lines during the run", l.Kind, l.Path, l.Lines)
			if l.Status != "ok" && l.Status != "" {
				fmt.Fprintf(w, " (%s)", l.Status)
			}
			fmt.Fprintln(w)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "    note: %s\n", n)
		}
	}
}
