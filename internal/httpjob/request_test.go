package httpjob

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRequestValid(t *testing.T) {
	tests := []struct {
		in   string
		want Request
	}{
		{`{"url": "https://api.example.com/v1/x"}`, Request{URL: "https://api.example.com/v1/x", Method: "GET"}},
		{`{"url": "http://127.0.0.1:8080/hook?a=1", "method": "POST", "headers": {"Content-Type": "application/json", "X-Tab": "a\tb"}, "body": "{\"a\":1}"}`,
			Request{URL: "http://127.0.0.1:8080/hook?a=1", Method: "POST", Headers: map[string]string{"Content-Type": "application/json", "X-Tab": "a\tb"}, Body: `{"a":1}`}},
		{`{"url": "HTTPS://[::1]:443/", "method": "PROPFIND"}`, Request{URL: "HTTPS://[::1]:443/", Method: "PROPFIND"}},
		{`{"url": "https://h/", "method": "get", "headers": {}}`, Request{URL: "https://h/", Method: "get", Headers: map[string]string{}}},
		{`{"url": "https://user:pw@h/"}`, Request{URL: "https://user:pw@h/", Method: "GET"}},
		{`  {"url": "https://h/"}  ` + "\n", Request{URL: "https://h/", Method: "GET"}},
		{`{"url": "https://h/", "headers": {"X-Obs": "caf\u00e9"}}`, Request{URL: "https://h/", Method: "GET", Headers: map[string]string{"X-Obs": "café"}}},
	}
	for i, tt := range tests {
		got, err := ParseRequest([]byte(tt.in))
		require.NoError(t, err, "%d: %s", i, tt.in)
		assert.Equal(t, tt.want, got, "%d: %s", i, tt.in)
	}
}

func TestParseRequestInvalid(t *testing.T) {
	manyHeaders := make(map[string]string)
	for i := range MaxHeaders + 1 {
		manyHeaders[fmt.Sprintf("X-H%d", i)] = "v"
	}
	many, err := json.Marshal(Request{URL: "https://h/", Headers: manyHeaders})
	require.NoError(t, err)

	tests := []struct {
		in   string
		want string // after "httpjob: bad request: "
	}{
		{``, `payload is empty, want JSON such as {"url": "https://example.com/"}`},
		{`{"url": "https://h/"`, `payload is cut short: the JSON ends too soon`},
		{`[]`, `payload is JSON array, want an object such as {"url": "https://example.com/"}`},
		{`"https://h/"`, `payload is JSON string, want an object such as {"url": "https://example.com/"}`},
		{`null`, `url is missing`},
		{`{}`, `url is missing`},
		{`{"url": "https://h/", "timeout": "5s"}`, `payload: unknown field "timeout"`},
		{`{"url": "https://h/"} {}`, `payload has text after the JSON object`},
		{`{"url": "https://h/",}`, `payload: invalid character '}' looking for beginning of object key string`},
		{`{"url": 5}`, `url: want string, got JSON number`},
		{`{"url": "https://h/", "body": {"a": 1}}`, `body: want string, got JSON object`},
		{`{"url": "https://h/", "headers": {"A": ["x"]}}`, `headers: want string, got JSON array`},
		{`{"url": "ftp://h/x"}`, `url ftp://h/x: scheme "ftp" is not http or https`},
		{`{"url": "/relative"}`, `url /relative: scheme "" is not http or https`},
		{`{"url": "https:///path"}`, `url https:///path has no host`},
		{`{"url": "https://secret:hunter2@:80/?token=abc"}`, `url https://:80/ has no host`},
		{`{"url": "https://h:port/"}`, `url is not a URL: invalid port ":port" after host`},
		{`{"url": "https://u:hunter2@h/\u0001"}`, `url is not a URL: net/url: invalid control character in URL`},
		{`{"url": "https://h/` + strings.Repeat("a", MaxURLLen) + `"}`, `url is 8202 bytes, more than 8192`},
		{`{"url": "https://h/", "method": "GE T"}`, `method "GE T" is not an HTTP method`},
		{`{"url": "https://h/", "method": "` + strings.Repeat("M", 65) + `"}`, `method "` + strings.Repeat("M", 64) + `"... is not an HTTP method`},
		{`{"url": "https://h/", "headers": {"Bad Name": "v"}}`, `header name "Bad Name" is not a valid field name`},
		{`{"url": "https://h/", "headers": {"": "v"}}`, `header name "" is not a valid field name`},
		{`{"url": "https://h/", "headers": {"X-A": "line\r\nX-Injected: 1"}}`, `header "X-A": value has a control character at byte 4`},
		{`{"url": "https://h/", "headers": {"X-A": "nul\u0000"}}`, `header "X-A": value has a control character at byte 3`},
		{`{"url": "https://h/", "headers": {"host": "evil"}}`, `header "host" is set by the HTTP client, not the payload`},
		{`{"url": "https://h/", "headers": {"Content-Length": "5"}}`, `header "Content-Length" is set by the HTTP client, not the payload`},
		{`{"url": "https://h/", "headers": {"transfer-encoding": "chunked"}}`, `header "transfer-encoding" is set by the HTTP client, not the payload`},
		{`{"url": "https://h/", "headers": {"x-a": "1", "X-A": "2"}}`, `headers "X-A" and "x-a" are the same field`},
		{string(many), `101 headers, more than 100`},
	}
	for i, tt := range tests {
		got, err := ParseRequest([]byte(tt.in))
		require.Error(t, err, "%d: %s", i, quote(tt.in))
		assert.Equal(t, "httpjob: bad request: "+tt.want, err.Error(), "%d: %s", i, quote(tt.in))
		assert.ErrorIs(t, err, ErrBadRequest, "%d", i)
		assert.NotContains(t, err.Error(), "hunter2", "%d", i)
		assert.Equal(t, Request{}, got, "%d", i)
	}
}

func TestParseRequestTooLarge(t *testing.T) {
	payload, err := json.Marshal(Request{URL: "https://h/", Body: strings.Repeat("b", MaxPayload)})
	require.NoError(t, err)
	_, err = ParseRequest(payload)
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("httpjob: bad request: payload is %d bytes, more than %d", len(payload), MaxPayload), err.Error())

	// Just under the bound is fine.
	payload, err = json.Marshal(Request{URL: "https://h/", Body: strings.Repeat("b", MaxPayload-100)})
	require.NoError(t, err)
	_, err = ParseRequest(payload)
	assert.NoError(t, err)
}

// A Request marshals to a payload that parses back to it.
func TestRequestRoundTrip(t *testing.T) {
	r := Request{URL: "https://h/x?y=1", Method: "PUT", Headers: map[string]string{"A": "b"}, Body: "\x00binary\xff"}
	payload, err := json.Marshal(r)
	require.NoError(t, err)
	got, err := ParseRequest(payload)
	require.NoError(t, err)
	r.Body = "\x00binary\ufffd" // JSON strings are UTF-8
	assert.Equal(t, r, got)
}
