package rest

import "testing"

func TestHasLoneSurrogate(t *testing.T) {
	cases := map[string]bool{
		`{"a":"\ud83d\ude00"}`:  false, // a proper pair (😀)
		`{"a":"\\ud800"}`:       false, // an escaped backslash, then text
		`{"a":"\u00e9\n\"x"}`:   false,
		`{"a":"\ud800"}`:        true,
		`{"a":"\udc00"}`:        true,
		`{"a":"\ud800\u0041"}`:  true,
		`{"a":"x\ud800"}`:       true,
		`{"\ud800":"key too"}`:  true,
		`{"a":"\ud800\\udc00"}`: true,
	}
	for in, want := range cases {
		if got := hasLoneSurrogate([]byte(in)); got != want {
			t.Errorf("%s: got %v, want %v", in, got, want)
		}
	}
}
