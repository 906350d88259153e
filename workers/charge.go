package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// SettleFunc reads what a job really used of a named limit from its
// handler's answer (the headers and the first bytes of the body the
// handler handed to ObserveUsage): the tokens of an LLM call, from the
// answer's usage. SettleTemplate builds one from a placeholder such as
// "{answer.usage.total_tokens}".
type SettleFunc func(header http.Header, body []byte) (int, error)

// SettleTemplate returns a SettleFunc that reads a job's real cost from its
// answer, at the one placeholder tmpl is:
//
//	{answer.<path>}         the field at the dotted <path> of the answer body's
//	                        JSON object: {answer.usage.output_tokens}
//	{answer-header.<name>}  the answer's header <name>
//
// The value must be a whole number from 0 up: a JSON number (3, or 3.0) in
// the body, decimal digits in a header. A value that is missing or is not
// such a number is an error: the pool warns of it (once per policy) and the
// job stays charged its estimate (NamedLimit.SettleFrom).
//
// SettleTemplate reports an error for a template that is not one known
// placeholder naming a field.
func SettleTemplate(tmpl string) (SettleFunc, error) {
	s, err := parseSettleTemplate(tmpl)
	if err != nil {
		return nil, fmt.Errorf("workers: settle template %q: %w", tmpl, err)
	}
	return s.used, nil
}

type settleTemplate struct {
	tmpl   string
	header string   // {answer-header.NAME}: the header's name
	path   []string // {answer.PATH}: the path's fields
}

func parseSettleTemplate(tmpl string) (*settleTemplate, error) {
	const want = "want one placeholder: {answer.<path>} or {answer-header.<name>}"
	inner, ok := strings.CutPrefix(tmpl, "{")
	if ok {
		inner, ok = strings.CutSuffix(inner, "}")
	}
	if !ok || strings.ContainsAny(inner, "{}") {
		return nil, errors.New(want)
	}
	kind, field, _ := strings.Cut(inner, ".")
	switch {
	case kind != "answer" && kind != "answer-header":
		return nil, fmt.Errorf("unknown placeholder {%s}: %s", inner, want)
	case field == "":
		return nil, fmt.Errorf("placeholder {%s} names no field", inner)
	case len(field) > MaxKeyValue:
		return nil, fmt.Errorf("field name is %d bytes, more than %d", len(field), MaxKeyValue)
	case strings.IndexFunc(field, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return nil, fmt.Errorf("placeholder {%s} holds a space or control character", inner)
	}
	s := &settleTemplate{tmpl: tmpl}
	if kind == "answer-header" {
		s.header = field
		return s, nil
	}
	s.path = strings.Split(field, ".")
	if len(s.path) > maxSettleDepth {
		return nil, fmt.Errorf("placeholder {%s}: a path of more than %d fields", inner, maxSettleDepth)
	}
	for _, f := range s.path {
		if f == "" {
			return nil, fmt.Errorf("placeholder {%s}: an empty field in its path", inner)
		}
	}
	return s, nil
}

// maxSettleDepth bounds the fields of an {answer.PATH}.
const maxSettleDepth = 8

// used reads the real cost from an answer. As for costs, error messages
// name the field and, for a value of the wrong kind, its JSON kind, never
// an untrusted value.
func (s *settleTemplate) used(header http.Header, body []byte) (int, error) {
	if s.header != "" {
		v := strings.TrimSpace(header.Get(s.header))
		if v == "" {
			return 0, fmt.Errorf("settle template %q: header %q is missing or empty", s.tmpl, s.header)
		}
		if !isDigits(v) {
			return 0, fmt.Errorf("settle template %q: header %q is not a whole number", s.tmpl, s.header)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("settle template %q: header %q is not a whole number", s.tmpl, s.header)
		}
		return wholeUsed(s.tmpl, fmt.Sprintf("header %q", s.header), float64(n))
	}
	raw := json.RawMessage(body)
	for i, f := range s.path {
		if t := bytes.TrimSpace(raw); i > 0 && (len(t) == 0 || string(t) == "null") {
			return 0, fmt.Errorf("settle template %q: answer field %q is missing", s.tmpl, strings.Join(s.path[:i], "."))
		}
		fields, err := objectOf(raw)
		if err != nil {
			if i == 0 {
				return 0, fmt.Errorf("settle template %q: the answer's body is not a JSON object", s.tmpl)
			}
			return 0, fmt.Errorf("settle template %q: answer field %q is not an object", s.tmpl, strings.Join(s.path[:i], "."))
		}
		raw = fields[f]
	}
	what := fmt.Sprintf("answer field %q", strings.Join(s.path, "."))
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fmt.Errorf("settle template %q: %s is missing", s.tmpl, what)
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return 0, fmt.Errorf("settle template %q: %s is not a number (JSON %s)", s.tmpl, what, jsonKind(c))
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, fmt.Errorf("settle template %q: %s is not a number", s.tmpl, what)
	}
	return wholeUsed(s.tmpl, what, f)
}

// wholeUsed checks that f is a whole number from 0 to maxCost.
func wholeUsed(tmpl, what string, f float64) (int, error) {
	switch {
	case f != math.Trunc(f) || math.IsInf(f, 0):
		return 0, fmt.Errorf("settle template %q: %s is %v, not a whole number", tmpl, what, f)
	case f < 0:
		return 0, fmt.Errorf("settle template %q: %s is %v, negative", tmpl, what, f)
	case f > maxCost:
		return 0, fmt.Errorf("settle template %q: %s is %v, more than %d", tmpl, what, f, maxCost)
	}
	return int(f), nil
}

// usageKey carries a job's usageNote in its handler's context.
type usageKey struct{}

// usageNote is the answer a handler handed to ObserveUsage.
type usageNote struct {
	mu     sync.Mutex
	seen   bool
	header http.Header
	body   []byte
}

// ObserveUsage hands the pool the answer a job's handler got, its headers
// and the first bytes of its body, from which the pool reads what the job
// really used of each named limit with a SettleFrom (the usage of an LLM
// call) once the handler returns nil. A handler calls it with its answer;
// the http:request job does, with up to 64 KiB of the body. A later call
// replaces an earlier one. It does nothing outside a pool's handler; the
// pool keeps header and body until the job ends and does not change them.
func ObserveUsage(ctx context.Context, header http.Header, body []byte) {
	u, _ := ctx.Value(usageKey{}).(*usageNote)
	if u == nil {
		return
	}
	u.mu.Lock()
	u.seen, u.header, u.body = true, header, body
	u.mu.Unlock()
}

// charge settles job j's reservation, whose handler returned nil, at what
// the job really used of each of its named limits with a SettleFrom, read
// from the answer the handler observed (ObserveUsage): the difference from
// the estimate goes back to the bucket, or is taken on top as a debt the
// next grants pay (throttle.Reservation.Settle). An answer that was not
// observed, or a value that cannot be read, leaves the estimate charged and
// is warned of once per policy. A job that ran on a ticket holds no
// reservation (the library cannot settle a ticket's booking): it stays
// charged its estimate. charge is not settle, which ends the job.
func (p *Pool) charge(ctx context.Context, j *job) {
	if j.pol == nil || !j.pol.settles {
		return
	}
	if j.res == nil {
		j.logger().Debug("workers: the job ran on a ticket; its estimate stays charged")
		return
	}
	j.used.mu.Lock()
	seen, header, body := j.used.seen, j.used.header, j.used.body
	j.used.mu.Unlock()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	for i, l := range j.pol.limits {
		if l.SettleFrom == nil || i >= len(j.buckets) {
			continue
		}
		if !seen {
			p.warnUnsettled(j, errors.New("the handler observed no answer (ObserveUsage)"))
			return
		}
		n, err := l.SettleFrom(header, body)
		if err != nil {
			p.warnUnsettled(j, fmt.Errorf("limit %q: %w", l.Name, err))
			continue
		}
		if err := j.res.Settle(sctx, j.buckets[i].Key, n); err != nil {
			j.logger().Debug("workers: cannot settle the job's cost; its estimate stays charged", "limit", l.Name, "err", err)
		} else if n < j.buckets[i].N {
			select { // wake one job waiting for tokens (place)
			case j.rt.gaveBack <- struct{}{}:
			default:
			}
		}
	}
}

// warnUnsettled warns, once per policy for the life of the pool, that a
// job's real cost could not be read from its answer: it stays charged its
// estimate, which is never lowered by a guess.
func (p *Pool) warnUnsettled(j *job, err error) {
	if _, warned := p.unsettled.LoadOrStore(j.rt.name, struct{}{}); warned {
		return
	}
	j.logger().Warn("workers: cannot read what the job used from its answer; its estimate stays charged (warned once per policy)", "err", err)
}
