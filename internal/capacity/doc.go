// Package capacity is `netdoctor capacity`: an open-loop search for the
// highest request rate a service answers within its SLO, and a
// diagnosis of what stops it there.
//
// A short closed loop finds where to start. Then each step offers one
// rate open loop (latency from each request's intended send time, so
// the service's queueing is counted), discards its warm-up, and is
// judged on the rest: every objective's percentile of the latency of
// every request (failed ones at the time they failed or timed out), the
// share of requests that failed, and whether the service kept up with
// the rate. The rate doubles while steps pass and is then bisected
// between the last rate that met the SLO and the first that broke it;
// a rate near the knee runs again to measure the noise. Last, a step
// above the knee runs again as `run` runs, both sides sampled, and its
// diagnosis names what limited the capacity; the headroom says how far
// each other resource was from its limit. The whole search, diagnosis
// included, holds to a time budget (docs/capacity.md).
package capacity
