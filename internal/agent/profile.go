package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/pace"
)

// Profiles on request and on incidents: bounded in time and frequency,
// one at a time (cpuprof.Exclusive), of the servers the agent follows.
const (
	profileDefault  = 10 * time.Second
	profileMax      = agentapi.MaxWait // within the server's write timeout
	incidentProfile = 10 * time.Second
	incidentHz      = 49
)

// errNoServers: nothing to profile behind the port asked for.
var errNoServers = errors.New("no server followed behind that port")

// processes names the servers' processes the agent follows behind port
// (every followed port when 0): their samples are the profile's.
func (p *pools) processes(port int) map[int]string {
	p.mu.Lock()
	var obs []*app.Observer
	for pt, pl := range p.byPort {
		if port == 0 || pt == port {
			obs = append(obs, pl.obs)
		}
	}
	p.mu.Unlock()
	out := map[int]string{}
	for _, o := range obs {
		maps.Copy(out, o.Processes())
	}
	return out
}

// profile takes an on-CPU profile of the servers behind port for d, or
// until ctx ends.
func (a *Agent) profile(ctx context.Context, port int, d time.Duration, hz int) (*cpuprof.Profile, error) {
	if len(a.pools.processes(port)) == 0 {
		return nil, errNoServers
	}
	p, done, err := cpuprof.Exclusive(cpuprof.Options{Hz: hz, Servers: func() map[int]string { return a.pools.processes(port) }})
	if err != nil {
		return nil, err
	}
	pace.Sleep(ctx, d)
	prof := p.Stop()
	done()
	a.stats.profiles.Add(1)
	a.stats.lastProfileCPU.Store(int64(prof.Cost.Sampling + prof.Cost.Symbolize))
	return prof, nil
}

// profileHandler serves GET profile?port=&seconds=&hz=&format=: an
// on-CPU profile of the followed servers behind port (all of them
// without one), in pprof's format (go tool pprof reads it) or, with
// format=json, as the reports sum it up.
func (h *handler) profileHandler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	port := 0
	if s := q.Get("port"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 65535 {
			fail(w, http.StatusBadRequest, "port: want a TCP port, 1 to 65535, got %q", s)
			return
		}
		port = n
	}
	d := profileDefault
	if s := q.Get("seconds"); s != "" {
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || n <= 0 || time.Duration(n*float64(time.Second)) > profileMax {
			fail(w, http.StatusBadRequest, "seconds: want more than 0 and at most %v, got %q", profileMax.Seconds(), s)
			return
		}
		d = time.Duration(n * float64(time.Second))
	}
	hz := cpuprof.DefaultHz
	if s := q.Get("hz"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < cpuprof.MinHz || n > cpuprof.MaxHz {
			fail(w, http.StatusBadRequest, "hz: want %d to %d, got %q", cpuprof.MinHz, cpuprof.MaxHz, s)
			return
		}
		hz = n
	}
	format := q.Get("format")
	if format != "" && format != "pprof" && format != "json" {
		fail(w, http.StatusBadRequest, "format: want pprof or json, got %q", format)
		return
	}
	prof, err := h.a.profile(r.Context(), port, d, hz)
	switch {
	case errors.Is(err, errNoServers):
		fail(w, http.StatusNotFound, "%v: %d (the agent follows the servers of its namespace's %d lowest listening ports)", err, port, MaxPools)
		return
	case cpuprof.IsBusy(err):
		w.Header().Set("Retry-After", strconv.Itoa(int(profileMax.Seconds())))
		fail(w, http.StatusConflict, "%v: one at a time", err)
		return
	case err != nil:
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	h.a.cfg.Log.Info("profile taken", "port", port, "seconds", d.Seconds(), "hz", hz, "samples", prof.Kept, "from", clientAddr(r))
	if format == "json" {
		sum, err := cpuprof.Summarize(prof)
		if err != nil {
			fail(w, http.StatusInternalServerError, "%v", err)
			return
		}
		reply(w, sum)
		return
	}
	// Over the API, symbols only: a kernel address says where the
	// kernel was loaded, which KASLR hides from anyone but local root.
	if prof, err = prof.WithoutKernelAddresses(); err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", fmt.Sprintf("netdoctor-%s-%d.pprof", time.Now().UTC().Format("20060102T150405Z"), port)))
	w.Header().Set("Cache-Control", "no-store")
	w.Write(prof.PProf)
}

// incidentProfile starts a profile of every followed server for an
// incident, at a low frequency: the agent runs for months.
func (a *Agent) incidentProfile() (func() *cpuprof.Profile, error) {
	if len(a.pools.processes(0)) == 0 {
		return nil, errors.New("the agent follows no server: nothing to profile")
	}
	p, done, err := cpuprof.Exclusive(cpuprof.Options{Hz: incidentHz, Servers: func() map[int]string { return a.pools.processes(0) }})
	if err != nil {
		return nil, err
	}
	return func() *cpuprof.Profile {
		prof := p.Stop()
		done()
		a.stats.profiles.Add(1)
		a.stats.lastProfileCPU.Store(int64(prof.Cost.Sampling + prof.Cost.Symbolize))
		return prof
	}, nil
}
