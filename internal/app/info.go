package app

import "fmt"

// Setting is one configuration value and where it was set: "file:line",
// or "default" when the configuration leaves it to the program.
type Setting struct {
	Value  int    `json:"value"`
	Source string `json:"source"`
}

func (s Setting) String() string {
	if s.Source == "" || s.Source == "default" {
		return fmt.Sprintf("%d (default)", s.Value)
	}
	return fmt.Sprintf("%d (%s)", s.Value, s.Source)
}

// NginxInfo is what the rules need of nginx's effective configuration.
type NginxInfo struct {
	WorkerProcesses    Setting       `json:"worker_processes"`
	WorkerConnections  Setting       `json:"worker_connections"`
	WorkerRlimitNofile Setting       `json:"worker_rlimit_nofile"` // Value 0: not set
	Listens            []NginxListen `json:"listens"`
	// NoDelayOff lists where tcp_nodelay is off ("file:line").
	NoDelayOff []string        `json:"tcp_nodelay_off,omitempty"`
	Upstreams  []NginxUpstream `json:"upstreams,omitempty"`
	// Limits are its limit_req, limit_req_zone, limit_conn and
	// limit_conn_zone directives, wherever they are.
	Limits []NginxLimit `json:"limits,omitempty"`
}

// NginxLimit is one limiter directive.
type NginxLimit struct {
	Directive string `json:"directive"` // "limit_req", "limit_req_zone"…
	// Zone is the zone it names or declares (zone=NAME, without :SIZE;
	// limit_conn's first argument).
	Zone   string `json:"zone"`
	Args   string `json:"args"`
	Source string `json:"source"` // file:line
}

// Workers is worker_processes, at least 1.
func (n *NginxInfo) Workers() int { return max(n.WorkerProcesses.Value, 1) }

// Holds is how many connections nginx can hold at once: worker_connections
// for each worker.
func (n *NginxInfo) Holds() int { return n.Workers() * max(n.WorkerConnections.Value, 1) }

// NginxListen is one listen directive.
type NginxListen struct {
	Addr    string `json:"addr"`    // host:port as nginx binds it
	Backlog int    `json:"backlog"` // -1: nginx's default (511 on Linux)
	Source  string `json:"source"`
}

// NginxUpstream is one place nginx passes requests to.
type NginxUpstream struct {
	// Pass is the directive ("fastcgi_pass", "proxy_pass"…) and where
	// it is; Target what it names (an upstream block or an address).
	Pass, PassSource, Target string
	// Servers are the addresses behind Target.
	Servers []string `json:"servers"`
	// Block is the upstream block's source ("" when Target is an
	// address); Keepalive its keepalive (0: none).
	Block     string `json:"block,omitempty"`
	Keepalive int    `json:"keepalive"`
	// Reuse says whether requests may reuse a connection: keepalive in
	// the block plus fastcgi_keep_conn on, or proxy_http_version 1.1
	// with the Connection header cleared. Why says what is missing, for
	// a person; the fields below say it for code.
	Reuse bool   `json:"reuse"`
	Why   string `json:"why,omitempty"`
	// The pass's own switches as nginx has them in effect there, each
	// with its source ("default": not set): fastcgi_keep_conn for a
	// fastcgi_pass, proxy_http_version for a proxy_pass; nil for other
	// passes.
	KeepConn    *Param `json:"keep_conn,omitempty"`
	HTTPVersion *Param `json:"http_version,omitempty"`
	// Connection is a proxy_pass's proxy_set_header Connection, nil when
	// none is set; ConnectionClose reports that nginx sends "Connection:
	// close" to a request without Upgrade (no header set, or one that
	// says close), which keeps no connection open.
	Connection      *Param `json:"connection,omitempty"`
	ConnectionClose bool   `json:"connection_close,omitempty"`
}

// Param is a directive's value as written and where: "file:line", or
// "default" when the configuration leaves it to nginx.
type Param struct {
	Value  string `json:"value"`
	Source string `json:"source"`
}

// PoolInfo is what the rules need of a php-fpm pool.
type PoolInfo struct {
	Name        string  `json:"name"`
	Listen      string  `json:"listen"`
	Backlog     Setting `json:"listen_backlog"`
	PM          string  `json:"pm"`
	MaxChildren Setting `json:"max_children"`
	StatusPath  string  `json:"status_path,omitempty"`
	RlimitFiles Setting `json:"rlimit_files"` // Value 0: not set
	// WorkerRSS is the workers' mean resident memory when discovered,
	// for sizing pm.max_children.
	WorkerRSS uint64 `json:"worker_rss_bytes,omitempty"`
}

// PoolStatus is one read of php-fpm's status page.
type PoolStatus struct {
	ListenQueue        int `json:"listen_queue"`
	MaxListenQueue     int `json:"max_listen_queue"`
	ListenQueueLen     int `json:"listen_queue_len"`
	Idle               int `json:"idle_processes"`
	Active             int `json:"active_processes"`
	Total              int `json:"total_processes"`
	MaxActive          int `json:"max_active_processes"`
	MaxChildrenReached int `json:"max_children_reached"`
	SlowRequests       int `json:"slow_requests"`
}
