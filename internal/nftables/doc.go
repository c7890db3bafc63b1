// Package nftables reads a network namespace's firewall rules that can
// discard a packet — nftables rules, and iptables rules made by
// iptables-nft (Debian's default), which are nftables rules too — over
// netlink (github.com/google/nftables), with their counters, and names
// each as nft and iptables would print it. A drop reason says that a
// firewall dropped a packet (NETFILTER_DROP); the rule whose counter
// moved in the same window says which rule, with its matches.
//
// Rules of iptables-legacy (x_tables) are not read: that API is
// another, and Debian 12 no longer uses it by default.
package nftables
