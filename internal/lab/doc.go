// Package lab builds small, disposable test beds out of network
// namespaces: a client and a server joined by a veth, real servers (nginx,
// php-fpm, dnsmasq, redis from Debian) started inside, and the faults the
// seed cases describe applied with the kernel's own knobs (per-namespace
// sysctls, tbf, nftables, the global conntrack limit). Everything an Env
// creates is removed, and every global it changes restored, by Close.
package lab
