package sysctl

import "testing"

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"4096\n": "4096", "32768\t60999\n": "32768 60999", "  4096  87380\t 6291456 ": "4096 87380 6291456", "": "",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}
