// Package run is `netdoctor run`: it samples the client's and the
// server's namespaces every second through a quiet baseline, a load and a
// tail, then runs the rules over the load window on each side.
package run
