// Package layer measures the capacity of each layer of the path between
// two hosts, below HTTP: bulk TCP throughput per stream and in total,
// with the retransmissions and round-trip times of the streams' own
// sockets (TCP_INFO), and UDP packet rate, loss, jitter and reordering.
//
// The far end is either any TCP discard server (upload only) or the
// test endpoint `netdoctor agent --test-endpoint` serves (Server):
// opt-in, token-gated, bounded in concurrency, time and bytes. The wire
// protocol is in proto.go and docs/agent.md.
package layer
