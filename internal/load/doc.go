// Package load is netdoctor's HTTP/1.1 load engine. Plain-HTTP load runs
// on one event loop per thread (epoll, non-blocking sockets, no allocation
// per request), as wrk does, so the generator is not the bottleneck; HTTPS
// runs one goroutine per connection over crypto/tls. Both share the
// incremental response parser and the statistics: an HDR latency
// histogram, wrk's error classes, status classes and a per-second
// timeline that callers can read live.
package load
