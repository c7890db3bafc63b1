package kmsg

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseRecord(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Record
	}{
		{
			name: "kernel",
			in:   "6,1234,5678901,-;TCP: time wait bucket table overflow\n",
			want: Record{Seq: 1234, Priority: 6, Facility: 0, Monotonic: 5678901 * time.Microsecond,
				Text: "TCP: time wait bucket table overflow"},
		},
		{
			name: "user space write",
			in:   "12,345,257707337,-;drifttest-xyz\n",
			want: Record{Seq: 345, Priority: 4, Facility: 1, Monotonic: 257707337 * time.Microsecond,
				Text: "drifttest-xyz"},
		},
		{
			name: "dictionary",
			in: "4,98,1000,-;virtio_net virtio0 eth0: NETDEV WATCHDOG: CPU: 1: transmit queue 0 timed out 5368 ms\n" +
				" SUBSYSTEM=net\n DEVICE=n2\n",
			want: Record{Seq: 98, Priority: 4, Monotonic: time.Millisecond,
				Text: "virtio_net virtio0 eth0: NETDEV WATCHDOG: CPU: 1: transmit queue 0 timed out 5368 ms"},
		},
		{
			name: "caller field",
			in:   "4,2,0,-,caller=T1;[Firmware Bug]: TSC doesn't count with P0 frequency!\n",
			want: Record{Seq: 2, Priority: 4, Text: "[Firmware Bug]: TSC doesn't count with P0 frequency!"},
		},
		{
			name: "escapes",
			in:   `6,7,8,c;line one\x0aline two\x09tab \x5c backslash \xe2\x82\xac` + "\n",
			want: Record{Seq: 7, Priority: 6, Monotonic: 8 * time.Microsecond,
				Text: "line one\nline two\ttab \\ backslash €"},
		},
		{
			name: "incomplete escapes",
			in:   `6,7,8,-;a\x4 \xzz \ \x`,
			want: Record{Seq: 7, Priority: 6, Monotonic: 8 * time.Microsecond, Text: `a\x4 \xzz \ \x`},
		},
		{
			name: "semicolon in text",
			in:   "6,1,2,-;a;b\n",
			want: Record{Seq: 1, Priority: 6, Monotonic: 2 * time.Microsecond, Text: "a;b"},
		},
		{
			name: "three header fields",
			in:   "30,1,2;systemd[1]: started",
			want: Record{Seq: 1, Priority: 6, Facility: 3, Monotonic: 2 * time.Microsecond, Text: "systemd[1]: started"},
		},
		{
			name: "empty text",
			in:   "6,1,2,-;\n",
			want: Record{Seq: 1, Priority: 6, Monotonic: 2 * time.Microsecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRecord([]byte(tt.in))
			if err != nil {
				t.Fatalf("ParseRecord(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseRecord(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseRecordErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"6,1,2,-",
		"6,1;text",
		"x,1,2,-;text",
		"6,-1,2,-;text",
		"6,1,2.5,-;text",
		"6,1,99999999999999999999,-;text",
		"6,1,18446744073709551,-;text",
		" 6,1,2,-;text",
	} {
		_, err := ParseRecord([]byte(in))
		if !errors.Is(err, ErrParse) {
			t.Errorf("ParseRecord(%q) error = %v, want ErrParse", in, err)
		}
	}
}

func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{
		"6,1234,5678901,-;text\n KEY=value\n",
		`4,1,2,c;a\x0ab\x5c\x`,
		"12,345,257707337,-,caller=T1;netdoctor-test: TCP: time wait bucket table overflow\n",
		"6,1,2;",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := ParseRecord(b)
		if err != nil {
			return
		}
		if rec.Priority < 0 || rec.Priority > 7 || rec.Facility < 0 || rec.Monotonic < 0 {
			t.Errorf("ParseRecord(%q) = %+v: field out of range", b, rec)
		}
		if strings.Contains(rec.Text, "\n") && !strings.Contains(string(b), `\x0a`) &&
			!strings.Contains(string(b), `\x0A`) {
			t.Errorf("ParseRecord(%q) text %q contains a newline that was not escaped", b, rec.Text)
		}
		Classify(rec.Text)
	})
}
