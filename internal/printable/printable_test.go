package printable

import (
	"bytes"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"nginx", "nginx"},
		{"\x1b]0;PWNED\x07\x1b[8m", `\x1b]0;PWNED\x07\x1b[8m`},
		{"a\nb\tc\r", `a\nb\tc\r`},
		{"café ☕", "café ☕"},
		{"bad\xffbyte\xe2\x82", `bad\xffbyte\xe2\x82`},
		{"c1 \u009b[31m", `c1 \u009b[31m`},
		{"rtl \u202eevil\u2066", `rtl \u202eevil\u2066`},
		{"del\x7f", `del\x7f`},
		{"", ""},
	} {
		if got := String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := Text("line 1\n\tline 2\x1b[2J\n"); got != "line 1\n\tline 2\\x1b[2J\n" {
		t.Errorf("Text kept or escaped the wrong ones: %q", got)
	}
}

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	if NewWriter(w) != w {
		t.Error("a writer wrapped twice escapes twice")
	}
	if Raw(w) != &b || Raw(&b) != &b {
		t.Error("Raw")
	}
	for _, s := range []string{"Listeners:\n", "  tcp\t127.0.0.1:80\t", "\x1b]0;PWNED\x07\x1b[8mnginx\n", "é\n"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	want := "Listeners:\n  tcp\t127.0.0.1:80\t\\x1b]0;PWNED\\x07\\x1b[8mnginx\né\n"
	if b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07") {
		t.Error("an ESC or BEL byte got through")
	}
}

// FuzzString: whatever the input, nothing a terminal acts on comes out,
// and printable input comes out unchanged.
func FuzzString(f *testing.F) {
	f.Add("\x1b]0;PWNED\x07\x1b[8m")
	f.Add("ok\xc2\x9b")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{String(s), Text(s)} {
			for _, r := range out {
				if escaped(r, true) || r == 0xfffd && !strings.ContainsRune(s, 0xfffd) {
					t.Fatalf("%q → %q holds %U", s, out, r)
				}
			}
		}
		if clean(s, false) && String(s) != s {
			t.Fatalf("clean %q changed", s)
		}
	})
}
