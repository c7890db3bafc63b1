package load

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse feeds arbitrary bytes whole, split in two at a fuzzed
// position and byte by byte, and checks that all three agree.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in), uint16(len(tc.in)/2), tc.head, tc.closed)
	}
	for _, tc := range malformedCases {
		f.Add([]byte(tc.in), uint16(len(tc.in)/3), false, true)
	}
	f.Add([]byte(nginxResponse+nginxResponse), uint16(100), false, false)
	whole, split, bytewise := newRespParser(), newRespParser(), newRespParser()
	f.Fuzz(func(t *testing.T, in []byte, at uint16, head, closed bool) {
		k := int(at)
		if k > len(in) {
			k = len(in)
		}
		want := runParse(whole, head, closed, in)
		check := func(how string, got parseResult) {
			t.Helper()
			switch got.Err {
			case "", "malformed", "truncated":
			default:
				t.Fatalf("%s: unexpected error %q", how, got.Err)
			}
			if got.Err != "" || want.Err != "" {
				// Errors must agree, but not what was consumed before them.
				if got.Err != want.Err {
					t.Fatalf("%s: error %q, whole: error %q", how, got.Err, want.Err)
				}
				return
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s: parse mismatch (-whole +%s):\n%s", how, how, diff)
			}
		}
		check("whole", want)
		check("split", runParse(split, head, closed, in[:k], in[k:]))
		if len(in) <= 4096 {
			check("bytewise", runParse(bytewise, head, closed, feedSplits(in, 0)["bytewise"]...))
		}
	})
}
