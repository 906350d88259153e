package httpjob

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseRequest checks that ParseRequest never panics, that every error
// matches ErrBadRequest, and that what it accepts net/http accepts too and
// survives a round trip through JSON.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"url": "https://api.example.com/v1/x"}`,
		`{"url": "http://127.0.0.1:8080/hook?a=1", "method": "POST", "headers": {"Content-Type": "application/json"}, "body": "{\"a\":1}"}`,
		`{"url": "https://u:p@[::1]:443/p#f", "method": "PROPFIND", "headers": {"X-A": "caf\u00e9\t"}}`,
		`{"url": "ftp://h/"}`,
		`{"url": "https://h/", "headers": {"x-a": "1", "X-A": "2"}}`,
		`{"url": "https://h/", "headers": {"Host": "h2"}}`,
		`{"url": "https://h/", "method": "G\u0000T"}`,
		`{"url": "https://h/"} x`,
		`[]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := ParseRequest(payload)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("ParseRequest(%q): error %v does not match ErrBadRequest", payload, err)
			}
			return
		}
		if r.Method == "" || r.URL == "" || len(r.URL) > MaxURLLen || len(r.Headers) > MaxHeaders {
			t.Fatalf("ParseRequest(%q) = %+v: out of bounds", payload, r)
		}
		req, err := http.NewRequest(r.Method, r.URL, strings.NewReader(r.Body))
		if err != nil {
			t.Fatalf("ParseRequest(%q) accepted %+v, which net/http refuses: %v", payload, r, err)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" || req.URL.Host == "" {
			t.Fatalf("ParseRequest(%q) accepted URL %q", payload, r.URL)
		}
		for name, value := range r.Headers {
			if reservedHeaders[http.CanonicalHeaderKey(name)] {
				t.Fatalf("ParseRequest(%q) accepted reserved header %q", payload, name)
			}
			if strings.ContainsAny(value, "\r\n\x00") {
				t.Fatalf("ParseRequest(%q) accepted header %q with value %q", payload, name, value)
			}
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := ParseRequest(again)
		if err != nil {
			t.Fatalf("ParseRequest(%q) = %+v, whose JSON %q does not parse: %v", payload, r, again, err)
		}
		if len(r.Headers) == 0 {
			r.Headers, r2.Headers = nil, nil // {} and absent are the same
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip of %q: %+v became %+v", payload, r, r2)
		}
	})
}
