// Package run is `netdoctor run`: it samples the client's and the
// server's sides through their evidence sources every second, through a
// quiet baseline, the load and a tail, discovers the servers behind the
// target port and samples their workers, and hands what it observed
// (evidence.Run) to rules.Diagnose. The run's evidence is also a file, the
// run bundle, that `diagnose` reads back.
package run
