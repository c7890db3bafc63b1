package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// headerFlags collects repeated -H values.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

// maxRequestsRun bounds a -n run without -d: every load ends by itself.
const maxRequestsRun = 10 * time.Minute

// loadOpts are the flags of `load` and `run`: wrk's, short and long,
// and netdoctor's own.
type loadOpts struct {
	o        load.Options
	latency  bool
	jsonOut  string
	body     string
	bodyFile string
	ramp     string
	script   string
	engine   string
}

func loadFlags(fs *flag.FlagSet) *loadOpts {
	lo := &loadOpts{}
	o := &lo.o
	wrkIntVar(fs, &o.Connections, 10, "connections to keep open (wrk's SI suffix works: 1k)", "c", "connections")
	wrkIntVar(fs, &o.Threads, 2, "event-loop threads", "t", "threads")
	wrkDurationVar(fs, &o.Duration, 0, "test duration: 10s, 2m, 1h, or a number of seconds as in wrk (default 10s; with -n, at most "+maxRequestsRun.String()+")", "d", "duration")
	fs.Int64Var(&o.Requests, "n", 0, "stop after this many requests")
	fs.Float64Var(&o.Rate, "R", 0, "open-loop constant rate in requests/s; latency counts from each request's intended send time")
	fs.Float64Var(&o.Rate, "rate", 0, "same as -R")
	wrkDurationVar(fs, &o.Timeout, 2*time.Second, "a request without a complete response by then is a timeout error (a bare number is seconds)", "timeout", "T")
	fs.BoolVar(&o.NoKeepAlive, "no-keepalive", false, "a new connection per request, closed after the response")
	fs.Var((*headerFlags)(&o.Header), "H", "request header 'Name: value' (repeatable)")
	fs.Var((*headerFlags)(&o.Header), "header", "same as -H")
	fs.StringVar(&o.Method, "m", "GET", "request method")
	fs.StringVar(&o.Method, "method", "GET", "same as -m")
	fs.StringVar(&lo.body, "body", "", "request body")
	fs.StringVar(&lo.bodyFile, "body-file", "", "read the request body from this file")
	fs.StringVar(&lo.ramp, "ramp", "", "step connections FROM:TO over DURATION, e.g. 10:1000:30s")
	fs.BoolVar(&lo.latency, "latency", false, "print the latency distribution")
	fs.BoolVar(&lo.latency, "L", false, "same as --latency")
	fs.StringVar(&lo.script, "script", "", "wrk's Lua script (wrk's API; arguments after the URL or after -- go to init)")
	fs.StringVar(&lo.script, "s", "", "same as --script")
	fs.StringVar(&lo.jsonOut, "json", "", "write the result as JSON to this file (- for stdout, and the text to stderr)")
	engineFlag(fs, lo)
	return lo
}

// engineFlag is --engine, which load, run and capacity share.
func engineFlag(fs *flag.FlagSet, lo *loadOpts) {
	fs.StringVar(&lo.engine, "engine", "auto", "the load engine: io_uring, epoll, or auto (io_uring where this host allows it, else epoll)")
}

// loadArgs is o as the load flags of run (and load) that make it: how
// `lab list -v` shows a scenario's load, and how tests give one to the
// command line. TestLoadArgs parses them back (loadFlags) into o.
func loadArgs(o load.Options) []string {
	var a []string
	add := func(name, value string) { a = append(a, flagName(name), value) }
	if o.Connections != 0 {
		add("c", strconv.Itoa(o.Connections))
	}
	if o.Threads != 0 {
		add("t", strconv.Itoa(o.Threads))
	}
	if o.Duration != 0 {
		add("d", o.Duration.String())
	}
	if o.Requests != 0 {
		add("n", strconv.FormatInt(o.Requests, 10))
	}
	if o.Rate != 0 {
		add("R", strconv.FormatFloat(o.Rate, 'g', -1, 64))
	}
	if o.Timeout != 0 {
		add("timeout", o.Timeout.String())
	}
	if o.NoKeepAlive {
		a = append(a, flagName("no-keepalive"))
	}
	if o.Engine != "" && o.Engine != load.EngineAuto {
		add("engine", string(o.Engine))
	}
	if o.Method != "" && o.Method != "GET" {
		add("m", o.Method)
	}
	for _, h := range o.Header {
		add("H", h)
	}
	if o.Body != nil {
		add("body", string(o.Body))
	}
	if r := o.Ramp; r != nil {
		add("ramp", fmt.Sprintf("%d:%d:%s", r.From, r.To, r.Over))
	}
	return a
}

// wrkShort are the flags splitShort separates from their attached
// values ("-c50", "-d10s", "-T2", "-sfile.lua").
const wrkShort = "ctdnRHmsT"

// longNames maps the long (or second) name of a load flag to the name
// check and the progress line look for.
var longNames = map[string]string{"connections": "c", "threads": "t", "duration": "d", "header": "H", "T": "timeout", "L": "latency", "s": "script"}

// check validates the flags that the engine cannot judge alone. It marks
// a flag given under its other name under the usual one in set too.
func (lo *loadOpts) check(set map[string]bool) error {
	for long, short := range longNames {
		if set[long] {
			set[short] = true
		}
	}
	o := &lo.o
	switch {
	case set["c"] && o.Connections < 1:
		return badInput("-c %d: need at least one connection", o.Connections)
	case o.Threads < 1:
		return badInput("-t %d: need at least one thread", o.Threads)
	case set["d"] && o.Duration <= 0:
		return badInput("-d %v: the duration must be positive", o.Duration)
	case o.Requests < 0 || o.Rate < 0:
		return badInput("-n and -R must not be negative")
	case o.Timeout <= 0:
		return badInput("--timeout %v: must be positive", o.Timeout)
	case lo.body != "" && lo.bodyFile != "":
		return badInput("--body and --body-file are exclusive")
	}
	eng, err := load.ParseEngine(lo.engine)
	if err != nil {
		return badInput("--%v", strings.TrimPrefix(err.Error(), load.ErrInvalid.Error()+": "))
	}
	if _, _, err := load.EngineFor(eng); err != nil {
		return badInput("%v", strings.TrimPrefix(err.Error(), load.ErrInvalid.Error()+": "))
	}
	if eng != load.EngineAuto { // the zero value is auto: options as data say nothing of it
		o.Engine = eng
	}
	if lo.script != "" {
		s, err := load.LoadScript(lo.script)
		if err != nil {
			return usageError{err}
		}
		o.Script = s
	}
	if o.Requests > 0 && !set["d"] {
		o.Duration = maxRequestsRun
	}
	if lo.ramp != "" {
		r, err := load.ParseRamp(lo.ramp)
		if err != nil {
			return badInput("--%v", err)
		}
		o.Ramp = r
	}
	if lo.body != "" {
		o.Body = []byte(lo.body)
	}
	if lo.bodyFile != "" {
		b, err := os.ReadFile(lo.bodyFile)
		if err != nil {
			return badInput("--body-file: %v", err)
		}
		o.Body = b
	}
	return nil
}

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("load", stderr)
	lo := loadFlags(fs)
	lay := layerFlags(fs)
	wk := workerFlags(fs, true)
	kube := kubeFlags(fs)
	pos, err := parse(fs, splitShort(args, wrkShort), stdout)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if len(pos) != 1 && (lo.script == "" || len(pos) == 0) {
		return badInput("load needs exactly one URL, e.g. netdoctor load -c 50 -d 10s http://127.0.0.1:8080/ (with -s, the script's arguments may follow it)")
	}
	if isLayerURL(pos[0]) {
		return runLayer(ctx, lo, lay, set, pos[0], stdout, stderr)
	}
	lo.o.URL = pos[0]
	if err := lo.check(set); err != nil {
		return err
	}
	if kube.on() {
		return kube.print(stdout, "load", lo.o, wk, time.Now())
	}
	if err := wk.apply(&lo.o, time.Now()); err != nil {
		return err
	}
	if err := checkOutput("json", lo.jsonOut); err != nil {
		return err
	}
	if err := checkOutput("debug-raw-latencies", wk.raw); err != nil {
		return err
	}
	if err := probeTarget(ctx, lo.o); err != nil {
		return err
	}
	text := stdout
	if lo.jsonOut == "-" {
		text = stderr // stdout carries the JSON alone
		if lo.o.Segment != nil {
			// A worker's logs are its result: kubectl logs prints
			// stderr with stdout, and merge reads them (the result
			// keeps the notes and the judgement the text would say).
			stderr, text = io.Discard, io.Discard
		}
	}
	conns := connRoom(&lo.o, stderr)
	lo.o.ScriptArgs, lo.o.ScriptOut = pos[1:], text
	p := newProgress(stderr, lo.o.Duration, set["d"] || lo.o.Requests == 0)
	lo.o.OnSecond = p.second
	lo.o.OnStart = func() {
		report.WrkHeader(text, describe(lo.o), lo.o.URL, min(lo.o.Threads, conns), conns)
	}
	res, err := load.Run(ctx, lo.o)
	p.done()
	if err != nil {
		if errors.Is(err, load.ErrInvalid) || errors.Is(err, load.ErrResolve) || errors.Is(err, load.ErrScript) {
			return usageError{err}
		}
		return err
	}
	if err := report.WrkText(text, res, lo.latency); err != nil {
		return err
	}
	if err := res.ScriptDone(); err != nil {
		return usageError{err}
	}
	if lo.jsonOut != "" {
		res.KeepHistograms()
		if err := writeLoadJSON(lo.jsonOut, stdout, res); err != nil {
			return err
		}
	}
	if err := wk.writeRaw(stdout, res); err != nil {
		return err
	}
	if res.Requests == 0 {
		return noResponse(res)
	}
	return nil
}

// connRoom says up front, on stderr, how many of the connections asked
// for this host can open (load.Capacity), and returns how many the load
// will run: the engine clamps to the same count, and marks the result as
// limited by the load generator.
func connRoom(o *load.Options, stderr io.Writer) int {
	asked := o.Connections
	if o.Ramp != nil {
		asked = o.Ramp.To
	}
	n, notes := load.Capacity(asked)
	for _, note := range notes {
		fmt.Fprintf(stderr, "netdoctor: %s\n", note)
	}
	return n
}

// noResponse is the error of a load in which no request got a response
// (a closed port, a server that never answers): its report is written,
// but it measures only failures, and a script must not take it for a
// measurement. It says why in one line: the errors by cause.
func noResponse(res *load.Result) error {
	causes := make([]string, 0, len(res.ErrorCauses))
	for c := range res.ErrorCauses {
		causes = append(causes, c)
	}
	slices.SortFunc(causes, func(a, b string) int {
		return cmp.Or(cmp.Compare(res.ErrorCauses[b], res.ErrorCauses[a]), cmp.Compare(a, b))
	})
	for i, c := range causes {
		causes[i] = fmt.Sprintf("%d %s", res.ErrorCauses[c], c)
	}
	msg := fmt.Sprintf("no request got a response from %s: %d errors", res.URL, res.Errors.Total())
	if len(causes) > 0 {
		msg += " (" + strings.Join(causes, ", ") + ")"
	}
	return errors.New(msg)
}

func describe(o load.Options) string {
	switch {
	case o.Requests > 0:
		return fmt.Sprintf("%d-request", o.Requests)
	case o.Duration > 0:
		return report.WrkDuration(o.Duration)
	}
	return "10s"
}

func writeLoadJSON(path string, stdout io.Writer, res *load.Result) error {
	return writeOut(path, stdout, "result", indentedJSON(report.NewLoad(res, rules.LoadGen(res))))
}

// splitShort turns wrk's attached short flags ("-t2", "-c50", "-d10s")
// into the separate form the flag package parses ("-t", "2").
func splitShort(args []string, letters string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.IndexByte(letters, a[1]) >= 0 && a[2] != '=' {
			out = append(out, a[:2], a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

// probeTarget opens one connection to a load's target before anything
// is measured (load.Probe): a target nothing listens on, that does not
// resolve, or a bad URL is bad input, said at once (load, capacity).
func probeTarget(ctx context.Context, o load.Options) error {
	if err := load.Probe(ctx, o); err != nil {
		if errors.Is(err, load.ErrInvalid) || errors.Is(err, load.ErrResolve) || errors.Is(err, load.ErrUnreachable) {
			return usageError{err}
		}
		return err
	}
	return nil
}
