package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// callStats times calls (a front's round trips to its backend, a
// backend's answers) for a test to compare with what netdoctor
// measured: a helper prints them on a "stats" line on stdin.
type callStats struct {
	n   atomic.Int64
	sum atomic.Int64 // nanoseconds
}

func (s *callStats) add(d time.Duration) {
	s.n.Add(1)
	s.sum.Add(int64(d))
}

// serveStats prints "calls N mean_us M" for each "stats" line on stdin,
// and returns when stdin closes.
func serveStats(s *callStats) {
	r := bufio.NewReader(os.Stdin)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if strings.TrimSpace(line) == "stats" {
			n, sum := s.n.Load(), s.sum.Load()
			mean := int64(0)
			if n > 0 {
				mean = sum / n / 1000
			}
			fmt.Printf("calls %d mean_us %d\n", n, mean)
		}
	}
}

// helperHTTPBackend is an HTTP/1.1 backend on ND_ADDR that writes each
// answer in several writes, as a server that flushes its headers first
// and its body in pieces does: the headers at once, then after ND_DELAY
// the body in ND_PARTS writes of 100 bytes, back to back. ND_NODELAY=0
// leaves Nagle on its accepted sockets (Go turns it off): the body's
// writes then wait for the ACK of what went before, which the client
// delays. Its stats are its own time per answer, from the request's
// last byte read to the body's last write.
func helperHTTPBackend() {
	network, addr := netAddr(os.Getenv("ND_ADDR"))
	ln, err := net.Listen(network, addr)
	must(err)
	delay, _ := time.ParseDuration(os.Getenv("ND_DELAY"))
	parts, _ := strconv.Atoi(os.Getenv("ND_PARTS"))
	parts = max(parts, 1)
	nagle := os.Getenv("ND_NODELAY") == "0"
	stats := &callStats{}
	body := strings.Repeat("x", 100)
	head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", parts*len(body))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if tc, ok := c.(*net.TCPConn); ok && nagle {
				tc.SetNoDelay(false)
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					for {
						line, err := r.ReadString('\n')
						if err != nil {
							return
						}
						if line == "\r\n" {
							break
						}
					}
					t0 := time.Now()
					if _, err := io.WriteString(c, head); err != nil {
						return
					}
					time.Sleep(delay) // the backend's time between head and body under test
					for range parts {
						if _, err := io.WriteString(c, body); err != nil {
							return
						}
					}
					stats.add(time.Since(t0))
				}
			}()
		}
	}()
	fmt.Println("ready")
	serveStats(stats)
}

// helperHTTPFront is a Go HTTP service on ND_ADDR whose every request
// makes one GET to ND_BACKEND through an http.Transport limited to
// ND_POOL connections (MaxConnsPerHost: requests beyond them wait inside
// the transport, where the kernel sees no queue). Its stats are the
// round trips to the backend, from the connection's handover to the
// answer's last byte: what the dependency costs per request, without
// the wait for a connection.
func helperHTTPFront() {
	network, addr := netAddr(os.Getenv("ND_ADDR"))
	ln, err := net.Listen(network, addr)
	must(err)
	n, _ := strconv.Atoi(os.Getenv("ND_POOL"))
	tr := &http.Transport{MaxConnsPerHost: n, MaxIdleConnsPerHost: n, IdleConnTimeout: time.Minute}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	url := "http://" + os.Getenv("ND_BACKEND") + "/"
	stats := &callStats{}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got time.Time
		var mu sync.Mutex
		trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { mu.Lock(); got = time.Now(); mu.Unlock() }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		mu.Lock()
		if err == nil && !got.IsZero() {
			stats.add(time.Since(got))
		}
		mu.Unlock()
		io.WriteString(w, "ok\n")
	}))
	fmt.Println("ready")
	serveStats(stats)
}

// nodeFront is helperHTTPFront in Node.js: one event loop, an
// http.Agent with maxSockets ND_POOL (requests beyond it wait in the
// agent's queue, inside the process). Its stats time each round trip
// from the socket's handover to the answer's end.
const nodeFront = `
const http = require("http");
const [host, port] = process.env.ND_ADDR.split(":");
const [bhost, bport] = process.env.ND_BACKEND.split(":");
const agent = new http.Agent({ keepAlive: true, maxSockets: +process.env.ND_POOL });
let n = 0, sum = 0n;
http.createServer((req, res) => {
  let t0;
  const r = http.get({ host: bhost, port: +bport, path: "/", agent }, (a) => {
    a.resume();
    a.on("end", () => {
      if (t0 !== undefined) { n++; sum += process.hrtime.bigint() - t0; }
      res.end("ok\n");
    });
  });
  r.on("socket", () => { t0 = process.hrtime.bigint(); });
  r.on("error", () => { res.statusCode = 502; res.end(); });
}).listen(+port, host, () => console.log("ready"));
let buf = "";
process.stdin.on("data", (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, i).trim();
    buf = buf.slice(i + 1);
    if (line === "stats") console.log("calls " + n + " mean_us " + (n ? Number(sum / BigInt(n) / 1000n) : 0));
  }
});
process.stdin.on("end", () => process.exit(0));
`

// javaService is a JVM HTTP service (com.sun.net.httpserver) whose
// requests run on Executors.newFixedThreadPool(ND_WORKERS): each holds a
// worker for ND_DELAY_MS off the CPU (Thread.sleep), while the JDK's
// dispatcher thread, its GC, JIT and VM threads do the rest. It warms
// its pool (the executor starts its threads with its first tasks) before
// it says ready.
const javaService = `
import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URL;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;

public class Svc {
    public static void main(String[] args) throws Exception {
        String[] a = System.getenv("ND_ADDR").split(":");
        int workers = Integer.parseInt(System.getenv("ND_WORKERS"));
        long delay = Long.parseLong(System.getenv("ND_DELAY_MS"));
        HttpServer s = HttpServer.create(new InetSocketAddress(a[0], Integer.parseInt(a[1])), 1024);
        s.createContext("/", ex -> {
            try { Thread.sleep(delay); } catch (InterruptedException e) { }
            byte[] b = "ok\n".getBytes();
            ex.sendResponseHeaders(200, b.length);
            try (OutputStream o = ex.getResponseBody()) { o.write(b); }
        });
        s.setExecutor(Executors.newFixedThreadPool(workers));
        s.start();
        CountDownLatch warm = new CountDownLatch(2 * workers);
        for (int i = 0; i < 2 * workers; i++) {
            new Thread(() -> {
                try { new URL("http://" + a[0] + ":" + a[1] + "/").openStream().readAllBytes(); } catch (Exception e) { }
                warm.countDown();
            }).start();
        }
        warm.await();
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() >= 0) { }
        System.exit(0);
    }
}
`

// helperStats asks a helper for its stats: the calls it timed and
// their mean.
func helperStats(h *helperProc) (n int, mean time.Duration, err error) {
	if _, err := h.stdin.Write([]byte("stats\n")); err != nil {
		return 0, 0, err
	}
	line, err := h.out.ReadString('\n')
	if err != nil {
		return 0, 0, err
	}
	var us int64
	if _, err := fmt.Sscanf(line, "calls %d mean_us %d", &n, &us); err != nil {
		return 0, 0, fmt.Errorf("stats %q: %w", line, err)
	}
	return n, time.Duration(us) * time.Microsecond, nil
}
