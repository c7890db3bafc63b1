package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
	"github.com/netdoctor/netdoctor/internal/phpfpm"
	"github.com/netdoctor/netdoctor/internal/trust"
)

// fpm reads a php-fpm master's configuration and picks the pool behind
// the listener. Its status page, when the pool has one, is sampled with
// the workers.
func (o *Observer) fpm(s *Server, master procInfo, l kernel.Listener) {
	conf, ok := phpfpm.ParseMaster(master.cmdline)
	if !ok {
		s.Notes = append(s.Notes, fmt.Sprintf("php-fpm master %d: its title %q does not name its configuration file", master.pid, master.cmdline))
		return
	}
	if !filepath.IsAbs(conf) {
		conf = filepath.Join(master.cwd, conf) // started with a relative -y
	}
	s.Config = conf
	// Through the master's root, so a php-fpm in a container is read from
	// its own files; paths in the Config stay as php-fpm sees them. Only
	// a master running as root, and only files root alone controls
	// (package trust): any user can start a program titled like php-fpm's
	// master that names any file.
	fsys, err := trust.ProcessFS(o.proc, master.pid, trust.Owned)
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("php-fpm master %d: configuration not read: %v (netdoctor reads only what root controls)", master.pid, err))
		return
	}
	root := fsys.Root
	cfg, err := phpfpm.LoadWith(conf, phpfpm.Options{FS: fsys})
	if cfg == nil {
		s.Notes = append(s.Notes, fmt.Sprintf("php-fpm configuration %s: %v", conf, err))
		return
	}
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("php-fpm configuration %s read in part: %v", conf, err))
	}
	if path, ok := cfg.Global.ErrorLogFile(); ok {
		s.Logs = append(s.Logs, &Log{Path: path, Kind: "error", Source: cfg.Global.ErrorLog.Where(), root: root})
	}
	pool := poolFor(cfg, l)
	if pool == nil {
		s.Notes = append(s.Notes, fmt.Sprintf("php-fpm configuration %s: no pool listens on %s", conf, l.Addr))
		return
	}
	pi := &PoolInfo{
		Name:        pool.Name,
		Listen:      pool.Listen.Value.String(),
		Backlog:     setting(pool.ListenBacklog),
		PM:          pool.PM.Value,
		MaxChildren: setting(pool.MaxChildren),
		StatusPath:  pool.StatusPath.Value,
		RlimitFiles: setting(pool.RlimitFiles),
		WorkerRSS:   meanRSS(o.proc, children(o.proc, master.pid)),
	}
	s.Pool = pi
	if pool.Slowlog.Value != "" && pool.RequestSlowlogTimeout.Value > 0 {
		s.Logs = append(s.Logs, &Log{Path: pool.Slowlog.Value, Kind: "error", Source: pool.Slowlog.Where(), root: root})
	}
	if pi.StatusPath != "" {
		network, addr := pool.Listen.Value.Network, pool.Listen.Value.Addr()
		if network == "tcp" && pool.Listen.Value.Host == "" {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(pool.Listen.Value.Port))
		}
		path := pi.StatusPath
		s.status = func(ctx context.Context) (*PoolStatus, error) {
			st, err := phpfpm.Status(ctx, func(ctx context.Context) (net.Conn, error) {
				return o.ns.Dial(ctx, network, addr)
			}, path)
			if err != nil {
				return nil, err
			}
			return poolStatus(st), nil
		}
	}
}

func setting[T int | int64](s phpfpm.Setting[T]) Setting {
	return Setting{Value: int(s.Value), Source: s.Where()}
}

// poolFor finds the pool whose listen address is the listener's.
func poolFor(cfg *phpfpm.Config, l kernel.Listener) *phpfpm.Pool {
	for _, p := range cfg.Pools {
		ln := p.Listen.Value
		switch {
		case l.Proto == "unix":
			if ln.Network == "unix" && ln.Path == l.Addr {
				return p
			}
		case ln.Network == "tcp" && ln.Port == l.Port:
			host, _, _ := net.SplitHostPort(l.Addr)
			if ln.Host == "" || ln.Host == host || (ln.Host == "localhost" && host == "127.0.0.1") {
				return p
			}
		}
	}
	return nil
}

// meanRSS is the workers' mean resident set size in bytes.
func meanRSS(proc string, pids []int) uint64 {
	var sum, n uint64
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 {
					if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
						sum += kb << 10
						n++
					}
				}
			}
		}
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

func poolStatus(st *phpfpm.PoolStatus) *PoolStatus {
	return &PoolStatus{
		ListenQueue: st.ListenQueue, MaxListenQueue: st.MaxListenQueue, ListenQueueLen: st.ListenQueueLen,
		Idle: st.IdleProcesses, Active: st.ActiveProcesses, Total: st.TotalProcesses, MaxActive: st.MaxActiveProcesses,
		MaxChildrenReached: int(st.MaxChildrenReached), SlowRequests: int(st.SlowRequests),
	}
}
