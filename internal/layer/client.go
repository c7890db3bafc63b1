package layer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Dialer opens a connection as net.Dialer.DialContext does; tests pass
// one that dials from inside a network namespace.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// ErrRefused is a test the endpoint refused: wrong token, busy, out of
// bounds. Its message is the endpoint's.
var ErrRefused = errors.New("the test endpoint refused")

func (d Dialer) orDefault() Dialer {
	if d != nil {
		return d
	}
	var nd net.Dialer
	return nd.DialContext
}

// control is the client's end of a test's control connection.
type control struct {
	c  net.Conn
	r  *bufio.Reader
	id string
}

// open starts a test on the endpoint at addr.
func open(ctx context.Context, dial Dialer, addr string, h Hello) (*control, error) {
	dctx, cancel := context.WithTimeout(ctx, handshakeLimit)
	defer cancel()
	c, err := dial(dctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(handshakeLimit))
	h.V = Version
	r := bufio.NewReaderSize(c, maxLine)
	var rep Reply
	if err := writeMsg(c, h); err != nil {
		c.Close()
		return nil, err
	}
	if err := readMsg(r, &rep); err != nil {
		c.Close()
		return nil, fmt.Errorf("test endpoint %s: no answer to the hello (is it netdoctor agent --test-endpoint?): %w", addr, err)
	}
	if rep.Error != "" || rep.ID == "" {
		c.Close()
		return nil, fmt.Errorf("%w: %s", ErrRefused, rep.Error)
	}
	c.SetDeadline(time.Time{})
	return &control{c: c, r: r, id: rep.ID}, nil
}

// finish sends Done and returns the endpoint's account of the test.
func (k *control) finish(sent uint64) (*Final, error) {
	defer k.c.Close()
	k.c.SetDeadline(time.Now().Add(grace + 2*time.Second))
	if err := writeMsg(k.c, Done{Sent: sent}); err != nil {
		return nil, err
	}
	var f Final
	if err := readMsg(k.r, &f); err != nil {
		return nil, fmt.Errorf("test endpoint's final account: %w", err)
	}
	if f.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrRefused, f.Error)
	}
	return &f, nil
}
