// Package rules turns evidence into findings. Each rule is a pure function
// of a bundle; active findings rest on something that changed or happened
// during the bundle's window, latent ones on settings and levels. Finding
// IDs are stable and listed in docs/findings.md.
package rules
