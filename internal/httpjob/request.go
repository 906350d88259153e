package httpjob

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// TaskType is the asynq task type of an HTTP request job.
const TaskType = "http:request"

// Bounds that [ParseRequest] enforces.
const (
	MaxPayload = 1 << 20 // bytes of JSON payload
	MaxURLLen  = 8 << 10 // bytes in Request.URL
	MaxHeaders = 100     // entries in Request.Headers
	maxMethod  = 64      // bytes in Request.Method
)

// Request is the payload of an http:request job. It marshals to the payload
// JSON, so callers can build payloads with json.Marshal.
type Request struct {
	URL     string            `json:"url"`               // http or https, with a host
	Method  string            `json:"method,omitempty"`  // "" means GET
	Headers map[string]string `json:"headers,omitempty"` // one value per field
	Body    string            `json:"body,omitempty"`    // sent as is
}

// ErrBadRequest is matched by every error [ParseRequest] returns.
var ErrBadRequest = errors.New("httpjob: bad request")

// reservedHeaders are fields the HTTP client writes itself, or that would
// change how it speaks HTTP; a payload may not set them.
var reservedHeaders = map[string]bool{
	"Host":              true,
	"Content-Length":    true,
	"Transfer-Encoding": true,
	"Trailer":           true,
	"Connection":        true,
	"Keep-Alive":        true,
	"Proxy-Connection":  true,
	"Te":                true,
	"Upgrade":           true,
}

// ParseRequest decodes and checks an http:request payload: JSON with the
// fields of [Request] and no others, at most [MaxPayload] bytes. The URL must
// be http or https with a host, at most [MaxURLLen] bytes; the method an HTTP
// token (GET if left out, which ParseRequest fills in); the headers at most
// [MaxHeaders], with valid names, no two names differing only in case, values
// without control characters other than tab, and none of the fields the HTTP
// client manages itself (Host, Content-Length, Transfer-Encoding, Connection
// and the other hop-by-hop fields).
//
// The error matches [ErrBadRequest]. It never shows the URL's user
// information or query, which often hold credentials.
func ParseRequest(payload []byte) (Request, error) {
	r, err := parseRequest(payload)
	if err != nil {
		return Request{}, fmt.Errorf("%w: %s", ErrBadRequest, err)
	}
	return r, nil
}

func parseRequest(payload []byte) (Request, error) {
	if len(payload) > MaxPayload {
		return Request{}, fmt.Errorf("payload is %d bytes, more than %d", len(payload), MaxPayload)
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Request{}, errors.New("payload has text after the JSON object")
	}
	if err := checkURL(r.URL); err != nil {
		return Request{}, err
	}
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	if len(r.Method) > maxMethod || !isToken(r.Method) {
		return Request{}, fmt.Errorf("method %s is not an HTTP method", quote(r.Method))
	}
	if err := checkHeaders(r.Headers); err != nil {
		return Request{}, err
	}
	return r, nil
}

func jsonError(err error) error {
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New(`payload is empty, want JSON such as {"url": "https://example.com/"}`)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("payload is cut short: the JSON ends too soon")
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Errorf(`payload is JSON %s, want an object such as {"url": "https://example.com/"}`, typ.Value)
	case errors.As(err, &typ):
		return fmt.Errorf("%s: want %s, got JSON %s", typ.Field, typ.Type, typ.Value)
	}
	return fmt.Errorf("payload: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func checkURL(raw string) error {
	if raw == "" {
		return errors.New("url is missing")
	}
	if len(raw) > MaxURLLen {
		return fmt.Errorf("url is %d bytes, more than %d", len(raw), MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // ue.Error() would quote the whole URL, password and all
		}
		return fmt.Errorf("url is not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url %s: scheme %s is not http or https", safeURL(u), quote(u.Scheme))
	}
	if u.Hostname() == "" {
		return fmt.Errorf("url %s has no host", safeURL(u))
	}
	return nil
}

func checkHeaders(h map[string]string) error {
	if len(h) > MaxHeaders {
		return fmt.Errorf("%d headers, more than %d", len(h), MaxHeaders)
	}
	seen := make(map[string]string, len(h))
	for name, value := range h {
		if !isToken(name) {
			return fmt.Errorf("header name %s is not a valid field name", quote(name))
		}
		canon := http.CanonicalHeaderKey(name)
		if reservedHeaders[canon] {
			return fmt.Errorf("header %s is set by the HTTP client, not the payload", quote(name))
		}
		if other, dup := seen[canon]; dup {
			a, b := min(name, other), max(name, other) // the same message whatever the map order
			return fmt.Errorf("headers %s and %s are the same field", quote(a), quote(b))
		}
		seen[canon] = name
		if i := badValueByte(value); i >= 0 {
			return fmt.Errorf("header %s: value has a control character at byte %d", quote(name), i)
		}
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token: one or more tchars.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// badValueByte returns the index of the first byte that may not appear in a
// field value (a control character other than tab, or DEL), or -1.
func badValueByte(v string) int {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return i
		}
	}
	return -1
}

// safeURL returns u for an error message: without its user information,
// query and fragment, which often carry credentials.
func safeURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = "", false, "", ""
	return c.String()
}

// maxQuoted bounds how much of a bad input goes into an error message.
const maxQuoted = 64

// quote returns s in Go quotes, cut to maxQuoted bytes.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxQuoted]) + "..."
}
