package lab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// Env is one test bed: a server and a client namespace joined by a veth
// pair, server at ServerIP, client at ClientIP, no route anywhere else.
type Env struct {
	Name               string
	ServerNS, ClientNS netns.NS // named, under /run/netns
	ServerIP, ClientIP string
	ServerDev          string // the server's end of the veth
	ClientDev          string
	Dir                string // config files, logs and sockets

	// DelayNS is the namespace between the two, when the lab was built
	// with a Link (NewLinked): its delay element forwards every frame
	// between the client's veth and the server's.
	DelayNS netns.NS
	delay   *Delay

	mu     sync.Mutex
	state  *state // what Close undoes, journaled for Clean
	procs  []*Proc
	closed bool
}

// ErrNeedsRoot reports that building a lab needs root.
var ErrNeedsRoot = errors.New("the lab needs root: it creates network namespaces")

// New creates the namespaces and the veth. id tells concurrent labs
// apart; it picks the names (nd-ID-srv, nd-ID-cli) and the subnet
// 10.99.N.0/24 with N from it. On error nothing is left behind.
func New(id string) (*Env, error) { return create(id, nil) }

// NewLinked is New with a delay element between the client and the
// server: a third namespace, nd-ID-dly, holds the far end of each one's
// veth, and a Delay forwards the frames between them after l's delay (at
// its rate), so that the client and the server share one subnet and see
// a round trip of twice l.Delay. Close stops it before anything else.
func NewLinked(id string, l Link) (*Env, error) { return create(id, &l) }

func create(id string, link *Link) (*Env, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNeedsRoot
	}
	// The lab builds its network through netlink, but starts its
	// servers with `ip netns exec` (see start).
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("the lab needs ip(8) from iproute2: %w", err)
	}
	n := 1
	for _, c := range id {
		n = (n*31 + int(c)) % 250
	}
	e := &Env{
		Name:     id,
		ServerNS: netns.Parse("nd-" + id + "-srv"), ClientNS: netns.Parse("nd-" + id + "-cli"),
		ServerIP: fmt.Sprintf("10.99.%d.1", n+1), ClientIP: fmt.Sprintf("10.99.%d.2", n+1),
		ServerDev: "nds-" + short(id), ClientDev: "ndc-" + short(id),
	}
	for _, ns := range []netns.NS{e.ServerNS, e.ClientNS} {
		if _, err := os.Stat(ns.Path); err == nil {
			return nil, fmt.Errorf("namespace %s exists: another lab %q is running, or was killed (`netdoctor lab clean` removes what it left)", ns, id)
		}
	}
	// The directory and the journal under the lock Clean holds while it
	// tells live labs from leftovers: else a Clean between the two, or
	// one that read the journals before this one was written, removes
	// the directory of a lab being built.
	unlock, err := lockState()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "netdoctor-lab-"+id+"-")
	if err != nil {
		unlock()
		return nil, err
	}
	e.Dir = dir
	// The journal comes before anything it describes, so that `lab clean`
	// can undo a lab killed at any point after this.
	e.state, err = newState(id, []change{{Dir: dir}, {Netns: e.ServerNS.Name}, {Netns: e.ClientNS.Name}})
	unlock()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if link != nil {
		err = e.buildLinked(*link)
	} else {
		err = e.build()
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Delay is the lab's delay element, nil without one.
func (e *Env) Delay() *Delay { return e.delay }

// runs counts the labs Run built in this process.
var runs atomic.Int64

// RunID names the next lab a lab run builds: L and the process's ID, as `lab
// clean`'s users and the tests know them, and from this process's second
// lab on its turn after a dash (L1234-2): one process may build several
// at once (a test running scenarios side by side), and each needs
// namespaces, veths and a journal of its own.
func RunID() string {
	id := "L" + strconv.Itoa(os.Getpid()%100000)
	if n := runs.Add(1); n > 1 {
		id += "-" + strconv.FormatInt(n, 10)
	}
	return id
}

// short keeps interface names within IFNAMSIZ.
func short(id string) string {
	if len(id) > 10 {
		return id[len(id)-10:]
	}
	return id
}

// record journals a change before it is made, for Close and Clean.
func (e *Env) record(c change) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state.Changes = append(e.state.Changes, c)
	if err := e.state.save(); err != nil {
		return fmt.Errorf("lab journal: %w", err)
	}
	return nil
}

// Close stops every process the lab started, removes its namespaces (the
// veth goes with them) and files, and restores every global setting, in
// reverse order: it undoes the lab's journal as Clean would. It is safe
// to call more than once.
func (e *Env) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	procs := e.procs
	changes := slices.Clone(e.state.Changes)
	e.mu.Unlock()
	var delayErr error
	if e.delay != nil {
		delayErr = e.delay.Close()
	}
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop()
	}
	// Anything still running in the namespaces (a daemon that forked
	// away from its group) is killed before they are deleted.
	for _, c := range changes {
		if c.Netns != "" {
			killIn(c.Netns)
		}
	}
	// Other labs' globals are read, and ours restored, under the lock
	// SetGlobal takes. Without it the rest is still undone; the
	// journal then stays for `lab clean`.
	unlock, lockErr := lockState()
	held := map[string]string{}
	if lockErr == nil {
		defer unlock()
		held = otherLabs(e.state.path)
	}
	_, err := e.state.undo(held, lockErr)
	return errors.Join(err, delayErr)
}
