package sockdiag

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// DefaultMaxEstablishedDetail is the number of ESTABLISHED sockets above
// which Collect stops dumping them one by one. The kernel spends about
// 1 µs filling each dumped socket, so 20k keeps a snapshot near 20 ms.
const DefaultMaxEstablishedDetail = 20000

const (
	allStates  = uint32(1<<numStates - 1)
	listenBits = uint32(1 << stateListen)
	estabBits  = uint32(1 << stateEstablished)
	closeWait  = 8
	// listenExt asks for INET_DIAG_SKMEMINFO: its SK_MEMINFO_DROPS is
	// the socket's sk_drops — a listener's share of
	// TcpExt.ListenDrops, a UDP receiver's full buffer, a TCP
	// connection's dropped segments — with its buffer's size. Asked of
	// every dump: 40 bytes a socket more, 8–22 % more time for the dump
	// of 4000–8000 sockets (BenchmarkEstablishedDump: ~0.1 µs a socket).
	listenExt = uint8(1 << (inetDiagSKMemInfo - 1))
	memExt    = listenExt
)

type dump struct {
	name string
	udp  bool
	// round, for a TCP dump with Options.Senders, looks at each
	// connection's tcp_info.
	round *Round
	typ   uint16
	req   []byte
	c     *conn
	sum   Summary
	err   error
}

// Collect dumps the TCP sockets (IPv4 and IPv6) and, if asked, the unix
// sockets of the calling thread's network namespace, and aggregates them.
// The netlink sockets are opened on the calling thread, so a caller locked
// into another namespace observes that namespace; the dumps then run in
// parallel. A family the kernel lacks (IPv6 disabled) is skipped. With
// ErrPartial the returned Sockets are still usable.
func Collect(o Options) (*kernel.Sockets, error) {
	s, _, err := CollectSenders(o)
	return s, err
}

// CollectSenders is Collect, and with o.Senders the round of its
// accounting that the dump of the connections made: the connections'
// tcp_info, congestion control and send buffer are asked of the kernel
// in the same walk (BenchmarkSendersDump: what that costs).
func CollectSenders(o Options) (*kernel.Sockets, *kernel.Senders, error) {
	if o.MaxEstablishedDetail == 0 {
		o.MaxEstablishedDetail = DefaultMaxEstablishedDetail
	}
	// Listeners first: the kernel answers a LISTEN-only dump from the
	// listening hash without walking the established one (about 0.1 ms),
	// and their ports tell inbound connections from outgoing ones.
	listen := []*dump{{name: "tcp listeners", typ: tcpDiagGetSock, req: compatRequest(listenBits, listenExt)}}
	if o.Unix {
		listen = append(listen, &dump{name: "unix", typ: sockDiagByFamily, req: unixRequest()})
	}
	var total Summary
	errs := runDumps(listen, &total)
	compat := true
	if len(errs) > 0 && listen[0].err != nil {
		// A kernel without the legacy interface: one dump per family.
		compat = false
		total = Summary{}
		listen = append([]*dump{
			{name: "tcp4 listeners", typ: sockDiagByFamily, req: inetRequest(afInet, listenBits, listenExt)},
			{name: "tcp6 listeners", typ: sockDiagByFamily, req: inetRequest(afInet6, listenBits, listenExt)},
		}, listen[1:]...)
		errs = runDumps(listen, &total)
	}

	if o.Listeners != nil {
		o.Listeners(total.listeners)
	}
	states := allStates &^ listenBits
	skipEstab := o.HaveCurrEstab && o.CurrEstab > uint64(o.MaxEstablishedDetail)
	if skipEstab {
		states &^= estabBits
	}
	ext := memExt
	var round *Round
	if o.Senders != nil {
		ext |= infoExt | congExt
		round = o.Senders.Begin(o.SendersAt, total.listenPorts, o.SlowStartAfterIdle)
	}
	rest := []*dump{{name: "tcp", typ: tcpDiagGetSock, req: compatRequest(states, ext), round: round}}
	if !compat {
		rest = []*dump{
			{name: "tcp4", typ: sockDiagByFamily, req: inetRequest(afInet, states, ext), round: round},
			{name: "tcp6", typ: sockDiagByFamily, req: inetRequest(afInet6, states, ext), round: round},
		}
	}
	// UDP sockets, for the drops of each (a receiver whose buffer is
	// full); a kernel without UDP diag (CONFIG_INET_UDP_DIAG) has none.
	rest = append(rest,
		&dump{name: "udp4", typ: sockDiagByFamily, req: inetProtoRequest(afInet, unix.IPPROTO_UDP, ^uint32(0), memExt), udp: true},
		&dump{name: "udp6", typ: sockDiagByFamily, req: inetProtoRequest(afInet6, unix.IPPROTO_UDP, ^uint32(0), memExt), udp: true})
	for _, d := range rest {
		d.sum.PortLow, d.sum.PortHigh = o.PortLow, o.PortHigh
		d.sum.listenPorts = total.listenPorts
	}
	restErrs := runDumps(rest, &total)
	errs = append(errs, restErrs...)
	if skipEstab {
		est := int(o.CurrEstab) - total.tcp[closeWait]
		total.tcp[stateEstablished] = max(est, 0)
	}
	s := total.Sockets()
	if skipEstab {
		s.Note = fmt.Sprintf("%d ESTABLISHED sockets counted from TcpCurrEstab, not dumped (more than %d); remotes count the other states only",
			s.TCP["ESTABLISHED"], o.MaxEstablishedDetail)
	}
	var senders *kernel.Senders
	if round != nil {
		// Connections a dump did not show are gone only when it showed
		// every one: not ESTABLISHED left undumped, nor a walk the
		// kernel interrupted or that failed.
		complete := !skipEstab && len(restErrs) == 0
		note := s.Note
		if len(restErrs) > 0 {
			note = "the dump of the connections was incomplete (" + errors.Join(restErrs...).Error() + "): those it did not show keep their last look"
		}
		senders = round.Finish(complete, note)
	}
	return s, senders, errors.Join(errs...)
}

// runDumps opens a socket per dump on the calling thread, runs the dumps
// in parallel and merges their results into total.
func runDumps(dumps []*dump, total *Summary) []error {
	var errs []error
	var wg sync.WaitGroup
	for _, d := range dumps {
		c, err := open()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d.c = c
		if err := c.request(d.typ, d.req); err != nil {
			d.err = fmt.Errorf("request: %w", err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.err = d.run()
		}()
	}
	wg.Wait()
	for _, d := range dumps {
		if d.c != nil {
			d.c.close()
		}
		if d.err != nil && !unsupported(d.err) {
			errs = append(errs, fmt.Errorf("%s: %w", d.name, d.err))
		}
		total.merge(&d.sum)
	}
	return errs
}

func (d *dump) run() error {
	if d.name == "unix" {
		var m UnixDiagMsg
		return d.c.receive(func(p []byte) error {
			if err := DecodeUnixDiagMsg(p, &m); err != nil {
				return err
			}
			d.sum.AddUnix(&m)
			return nil
		})
	}
	var m InetDiagMsg
	if d.round != nil {
		var c ConnInfo
		return d.c.receive(func(p []byte) error {
			if err := DecodeConn(p, &m, &c); err != nil {
				return err
			}
			d.sum.AddInet(&m)
			d.round.Look(&m, &c)
			return nil
		})
	}
	return d.c.receive(func(p []byte) error {
		if err := DecodeInetDiagMsg(p, &m); err != nil {
			return err
		}
		if d.udp {
			d.sum.AddUDP(&m)
		} else {
			d.sum.AddInet(&m)
		}
		return nil
	})
}

// unsupported reports an error meaning the family is absent from this
// kernel or namespace, which is not a failure.
func unsupported(err error) bool {
	var e Errno
	if errors.As(err, &e) {
		return e == Errno(unix.ENOENT) || e == Errno(unix.EAFNOSUPPORT) || e == Errno(unix.EOPNOTSUPP)
	}
	return false
}
