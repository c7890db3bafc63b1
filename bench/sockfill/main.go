// Command sockfill holds a given number of TCP sockets open on loopback so
// that the snapshot benchmark can measure netdoctor against ss(8) on the
// same socket table. It runs where it is started (use `ip netns exec`),
// splits the connections over child processes to stay under RLIMIT_NOFILE,
// prints "ready" when every socket exists, and exits on SIGTERM or stdin EOF.
//
//	sockfill -sockets 100000 -timewait 20000
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

func main() {
	sockets := flag.Int("sockets", 100000, "total ESTABLISHED sockets to hold (two per connection)")
	timewait := flag.Int("timewait", 0, "extra connections to open and close, leaving TIME_WAIT sockets")
	perChild := flag.Int("per-child", 8000, "connections per child process")
	child := flag.Int("child", -1, "internal: run as child with this index")
	flag.Parse()
	if *child >= 0 {
		if err := runChild(*child, *perChild); err != nil {
			fmt.Fprintln(os.Stderr, "sockfill child:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*sockets/2, *perChild, *timewait); err != nil {
		fmt.Fprintln(os.Stderr, "sockfill:", err)
		os.Exit(1)
	}
}

func run(conns, perChild, timewait int) error {
	var kids []*exec.Cmd
	defer func() {
		for _, k := range kids {
			k.Process.Kill()
			k.Wait()
		}
	}()
	for i := 0; conns > 0; i++ {
		n := min(conns, perChild)
		conns -= n
		cmd := exec.Command(os.Args[0], "-child", strconv.Itoa(i), "-per-child", strconv.Itoa(n))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		defer stdin.Close()
		if err := cmd.Start(); err != nil {
			return err
		}
		kids = append(kids, cmd)
		buf := make([]byte, 6)
		if _, err := io.ReadFull(out, buf); err != nil {
			return fmt.Errorf("child %d did not get ready: %w", i, err)
		}
	}
	if err := makeTimeWait(timewait); err != nil {
		return err
	}
	fmt.Println("ready")
	// Wait for the caller to close stdin or send a signal.
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// runChild listens on its own port and connects n times to itself,
// accepting every connection, then holds them until stdin closes.
func runChild(idx, n int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	var held []net.Conn
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		held = append(held, c, <-accepted)
	}
	fmt.Print("ready\n")
	io.Copy(io.Discard, os.Stdin)
	_ = held
	return nil
}

// makeTimeWait opens and closes n connections, the client closing first so
// the client side keeps each in TIME_WAIT for 60 s.
func makeTimeWait(n int) error {
	if n == 0 {
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return fmt.Errorf("timewait connection %d: %w", i, err)
		}
		c.(*net.TCPConn).SetLinger(-1)
		c.Close()
	}
	_ = syscall.Getpid
	return nil
}
