// Package loadtest starts real servers for tests and benchmarks of the load
// generator: an nginx from the host, with a config of its own in a private
// directory, on a free loopback port, stopped with its workers when the
// test ends.
//
// Tests call StartNginx, which skips when nginx is not installed (run
// scripts/deps.sh); bench tools call StartNginxProcess and the stop
// function it returns.
package loadtest
