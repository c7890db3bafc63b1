// Package lab builds small, disposable test beds out of network
// namespaces: a client and a server joined by a veth, real servers
// started inside (nginx, php-fpm, dnsmasq, redis, haproxy and python3
// from Debian, and a few built into netdoctor), and the faults the seed
// cases describe applied with the kernel's own knobs (per-namespace
// sysctls, tbf, nftables, the global conntrack limit). Everything an Env
// creates is removed, and every global it changes restored, by Close.
package lab
