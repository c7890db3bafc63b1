package report

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// CheckPage turns a check's or a diagnosis's report (one namespace, no
// load) into the HTML page: the verdict and findings as a run's page
// shows them, then the host picture in place of the load.
func CheckPage(r *Report) *Page {
	ns := "host namespace"
	if r.Host.NetNS != "" {
		ns = "netns " + r.Host.NetNS
	}
	p := &Page{Command: r.Command, Target: r.Host.Hostname + " (" + ns + ")", Verdict: r.Verdict, Findings: r.Findings,
		Host: r.Host.Hostname + " · kernel " + r.Host.Kernel, When: r.Window.Start.Format(time.RFC1123)}
	for _, f := range r.Findings {
		p.Bad = p.Bad || f.Hurts()
	}
	if r.Dependencies != nil {
		p.Waits = WaitTables(r.Dependencies.Servers)
	}
	// check's profile of the servers behind its listeners: its
	// summary (the page has no flame graph: the report keeps no stacks).
	profilePage(p, r.Profile, nil)
	p.HostRows = hostRows(r)
	return p
}

// hostRows is the host picture of a report's window, as check's and
// run's pages show it: status, window, TCP states, listeners, conntrack,
// rates, collectors.
func hostRows(r *Report) [][2]string {
	s := r.Summary
	rows := [][2]string{
		{"status", string(r.Status)},
		{"window", fmt.Sprintf("%.1f s, %d snapshots", r.Window.Seconds, r.Window.Snapshots)},
		{"TCP sockets", states(s.TCPStates)},
	}
	for _, l := range s.Listeners {
		rows = append(rows, [2]string{"listener " + l.Addr, fmt.Sprintf("%s, accept queue %d of %d, %s", l.Proto, l.RecvQ, l.SendQ, procName(l))})
	}
	if c := s.Conntrack; c != nil {
		rows = append(rows, [2]string{"conntrack", fmt.Sprintf("%d of %d entries, drop %d, insert_failed %d", c.Count, c.Max, c.Stats["drop"], c.Stats["insert_failed"])})
	}
	for _, k := range keyRates {
		if v, ok := s.Rates[k]; ok {
			rows = append(rows, [2]string{k, fmt.Sprintf("%.1f/s", v)})
		}
	}
	var cs []string
	for _, st := range r.Collectors {
		c := st.Collector + "=" + st.State
		if st.Error != "" {
			c += " (" + st.Error + ")"
		}
		cs = append(cs, c)
	}
	return append(rows, [2]string{"collectors", strings.Join(cs, ", ")})
}

// CheckHTML writes a check's or a diagnosis's HTML page (CheckPage).
func CheckHTML(w io.Writer, r *Report) error { return HTML(w, CheckPage(r)) }
