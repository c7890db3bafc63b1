package app

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// TestWaitsSleeping: a real process in nanosleep is seen sleeping, not
// idle or running. These are the kernel's own wait channel names on the
// running kernel: if they change, the mapping must follow.
func TestWaitsSleeping(t *testing.T) {
	if _, err := os.Stat("/proc/self/wchan"); err != nil {
		t.Skip("no /proc/PID/wchan on this kernel")
	}
	cmd := exec.Command("sleep", "600") // killed below
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Once exec and the loader are done, however long that takes.
	poll.Until(t, time.Minute, func() error {
		if classes, other := Waits("/proc", []int{cmd.Process.Pid}, 0); classes[WaitSleep] != 1 {
			return fmt.Errorf("sleep(1) seen as %v (other %v)", classes, other)
		}
		return nil
	})
}

// TestWaitsReadingOwnClient: a process blocked reading a connection
// accepted on the port it serves waits for its client's next request
// (idle); read from any other socket it waits on a peer (network).
func TestWaitsReadingOwnClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	served, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	f, err := served.(*net.TCPConn).File() // a blocking descriptor for cat's stdin
	served.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("cat")
	cmd.Stdin = f
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	port := ln.Addr().(*net.TCPAddr).Port
	poll.Until(t, time.Minute, func() error {
		served, _ := Waits("/proc", []int{cmd.Process.Pid}, port)
		other, _ := Waits("/proc", []int{cmd.Process.Pid}, port+1)
		if served[WaitIdle] != 1 || other[WaitNetwork] != 1 {
			return fmt.Errorf("cat reading its client on :%d: %v; as another port's: %v", port, served, other)
		}
		return nil
	})
}

// TestWaitsDNS: a thread polling a UDP socket connected to port 53, as
// glibc's resolver waits for its nameserver, waits on a name lookup;
// the same poll on a socket to another port is idle. The thread is one
// of this test's own, so no tool is needed.
func TestWaitsDNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("copying another thread's descriptor (pidfd_getfd) needs root")
	}
	for _, tt := range []struct {
		port int
		want bool
	}{{53, true}, {54, false}} {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: tt.port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		var wake [2]int
		if err := unix.Pipe2(wake[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		tid := make(chan int, 1)
		go func() {
			runtime.LockOSThread() // the poll blocks this thread, seen in /proc
			defer close(done)
			tid <- unix.Gettid()
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake[0]), Events: unix.POLLIN}}, -1)
		}()
		// Once the thread sleeps in poll, one look classifies it.
		task := fmt.Sprintf("/proc/%d/task/%d", os.Getpid(), <-tid)
		poll.True(t, time.Minute, "the thread asleep in poll", func() bool {
			w, _ := os.ReadFile(task + "/wchan")
			return polls(task) && pollWchan[strings.TrimSpace(string(w))]
		})
		classes, _ := Waits("/proc", []int{os.Getpid()}, 0)
		got := classes[WaitDNS] > 0
		unix.Write(wake[1], []byte{1})
		<-done
		unix.Close(fd)
		unix.Close(wake[0])
		unix.Close(wake[1])
		if got != tt.want {
			t.Errorf("poll on a UDP socket to port %d: dns wait %v, want %v", tt.port, got, tt.want)
		}
	}
}
