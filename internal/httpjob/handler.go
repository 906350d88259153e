package httpjob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/workers"
)

const (
	// DefaultTimeout bounds a whole request, body included, when the Handler
	// has no Client of its own.
	DefaultTimeout = 30 * time.Second
	// maxDrain bounds how much of a response body the Handler reads: enough
	// to keep the connection for the next request in the common case,
	// without reading an endless body.
	maxDrain = 64 << 10
	// maxExcerpt bounds the part of a response body quoted in an error.
	maxExcerpt = 200
	// maxHead bounds the part of a response body kept for
	// backoff.ParseAnswer: a refusal's JSON retry_after.
	maxHead = 4 << 10
)

// defaultClient serves Handlers without a Client.
var defaultClient = &http.Client{Timeout: DefaultTimeout}

// Handler runs http:request jobs: it sends the job's request and turns the
// answer into the job's outcome (see [Handler.ProcessTask]). The zero value
// is ready to use. A Handler is safe for concurrent use.
type Handler struct {
	// Client sends the requests. nil means a shared client whose requests
	// time out after [DefaultTimeout]. Either way the job's context bounds
	// each request too.
	Client *http.Client
	// Now is the clock a Retry-After date is measured against; nil means time.Now.
	Now func() time.Time
	// Hosts, if not empty, are the only hosts a job may call (names or
	// addresses, compared without case and without the port). A job for any
	// other host, or a redirect to one, is archived with the reason: whoever
	// can enqueue cannot make the worker call an internal address.
	Hosts []string
}

// allowed reports whether the Handler may call u's host.
func (h *Handler) allowed(u *url.URL) bool {
	if len(h.Hosts) == 0 {
		return true
	}
	host := u.Hostname()
	for _, a := range h.Hosts {
		if strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// errHostNotAllowed is the reason a request or redirect to a host not in Hosts fails.
var errHostNotAllowed = errors.New("host is not in the worker's allowed hosts")

// ProcessTask runs the http:request job t under ctx. It returns
//
//   - nil for a 2xx answer;
//   - the *workers.UpstreamError from workers.FromAnswer for a refusal (a
//     429, a 503, or a 403 with a spent quota or a Retry-After: see
//     backoff.ParseAnswer), so that the worker pool pauses the upstream's
//     bucket on every host for the wait the upstream asked for and sends
//     the job back for after it;
//   - an error wrapping asynq.SkipRetry for a payload ParseRequest refuses,
//     for any other 4xx, and for a 1xx or 3xx the client did not follow: the
//     job is archived at once with the reason (the status and the start of
//     the response body), since sending it again would get the same answer;
//   - a plain error for any other 5xx and for network errors, which asynq
//     retries with backoff.
//
// The response body is read, up to 64 KiB, and closed whatever the outcome.
// Errors show the request's method and URL without its user information or
// query.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	r, err := parseRequest(t.Payload())
	if err != nil {
		return fmt.Errorf("%s: bad payload: %v: %w", TaskType, err, asynq.SkipRetry)
	}
	return h.do(ctx, r)
}

// do sends r, which ParseRequest accepted, and classifies the answer.
func (h *Handler) do(ctx context.Context, r Request) error {
	u, err := url.Parse(r.URL)
	if err != nil { // ParseRequest has parsed it
		return fmt.Errorf("%s: bad payload: url: %v: %w", TaskType, err, asynq.SkipRetry)
	}
	what := r.Method + " " + safeURL(u)
	if !h.allowed(u) {
		return fmt.Errorf("%s: %s: %w: %w", TaskType, what, errHostNotAllowed, asynq.SkipRetry)
	}
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, body)
	if err != nil {
		return fmt.Errorf("%s: %s: %v: %w", TaskType, what, err, asynq.SkipRetry)
	}
	for name, value := range r.Headers {
		req.Header.Set(name, value)
	}

	client := h.Client
	if client == nil {
		client = defaultClient
	}
	if len(h.Hosts) > 0 {
		c := *client
		next := c.CheckRedirect
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if !h.allowed(req.URL) {
				return fmt.Errorf("redirect to %s: %w", safeURL(req.URL), errHostNotAllowed)
			}
			if next != nil {
				return next(req, via)
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		}
		client = &c
	}
	resp, err := client.Do(req)
	if err != nil {
		// The error names the URL with its query; say it our way instead.
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err
		}
		if errors.Is(err, errHostNotAllowed) {
			return fmt.Errorf("%s: %s: %w: %w", TaskType, what, err, asynq.SkipRetry)
		}
		return fmt.Errorf("%s: %s: %w", TaskType, what, err)
	}
	read, excerpt := drainAndClose(resp.Body)
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	answer := backoff.ParseAnswer(resp.StatusCode, resp.Header, read[:min(len(read), maxHead)], now())
	workers.ObserveAnswer(ctx, answer)           // its rate-limit fields, for an adaptive limit
	workers.ObserveUsage(ctx, resp.Header, read) // what the job used, for a limit's settle=

	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		return nil
	case answer.Refused:
		return workers.FromAnswer(answer)
	case code >= 500:
		return fmt.Errorf("%s: %s answered %s%s", TaskType, what, resp.Status, excerpt)
	default: // 4xx, or a 1xx or 3xx the client did not act on
		return fmt.Errorf("%s: %s answered %s%s: %w", TaskType, what, resp.Status, excerpt, asynq.SkipRetry)
	}
}

// drainAndClose reads up to maxDrain bytes of body, closes it, and returns
// them, and their start for an error message: ": " and the text, quoted, or
// "" for an empty body. An answer's usage (settle=) may come at the end of
// its body, so all that is read is kept.
func drainAndClose(body io.ReadCloser) (read []byte, excerpt string) {
	defer body.Close()
	buf, _ := io.ReadAll(io.LimitReader(body, maxDrain))
	return buf, excerptOf(buf[:min(len(buf), maxExcerpt+1)]) // one more, to tell whether it was cut
}

// excerptOf makes the first maxExcerpt bytes of b readable in one line:
// invalid UTF-8 (a rune split by the cut, too) and control characters become
// spaces, runs of spaces one space, and a cut is marked.
func excerptOf(b []byte) string {
	cut := len(b) > maxExcerpt
	if cut {
		b = b[:maxExcerpt]
	}
	s := strings.Join(strings.FieldsFunc(strings.ToValidUTF8(string(b), " "), func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if s == "" {
		return ""
	}
	if cut {
		s += "..."
	}
	return fmt.Sprintf(": %q", s)
}
