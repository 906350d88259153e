package workers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/hibiken/asynq"
)

// CostTemplate returns a CostFunc that reads a job's cost from its task, at
// the one placeholder tmpl is:
//
//	{payload.<name>}  the top-level field <name> of the task's JSON object payload
//	{header.<name>}   the task header <name>
//	{body.<name>}     the top-level field <name> of the JSON object in the
//	                  payload's "body" string (an http:request job's request body)
//
// The value must be a whole number from 1 up: a JSON number (3, or 3.0) in
// a payload or body, decimal digits in a header. A field that is missing,
// null, not a number, fractional, or less than 1 is an error, and the job is
// archived with it (see ErrCost); the pool also refuses a cost above what the
// limit grants at once. Never a default: a job's cost is what it says.
//
// CostTemplate reports an error for a template that is not one known
// placeholder naming a field.
func CostTemplate(tmpl string) (CostFunc, error) {
	c, err := parseCostTemplate(tmpl)
	if err != nil {
		return nil, fmt.Errorf("workers: cost template %q: %w", tmpl, err)
	}
	return c.cost, nil
}

// costSource is where a cost template reads.
type costSource int

const (
	costPayload costSource = iota
	costHeader
	costBody
)

type costTemplate struct {
	tmpl  string
	from  costSource
	field string
}

func parseCostTemplate(tmpl string) (*costTemplate, error) {
	inner, ok := strings.CutPrefix(tmpl, "{")
	if ok {
		inner, ok = strings.CutSuffix(inner, "}")
	}
	if !ok || strings.ContainsAny(inner, "{}") {
		return nil, errors.New("want one placeholder: {payload.<field>}, {header.<name>} or {body.<field>}")
	}
	kind, field, _ := strings.Cut(inner, ".")
	c := &costTemplate{tmpl: tmpl, field: field}
	switch kind {
	case "payload":
		c.from = costPayload
	case "header":
		c.from = costHeader
	case "body":
		c.from = costBody
	default:
		return nil, fmt.Errorf("unknown placeholder {%s}: want {payload.<field>}, {header.<name>} or {body.<field>}", inner)
	}
	switch {
	case field == "":
		return nil, fmt.Errorf("placeholder {%s} names no field", inner)
	case len(field) > MaxKeyValue:
		return nil, fmt.Errorf("field name is %d bytes, more than %d", len(field), MaxKeyValue)
	case strings.IndexFunc(field, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return nil, fmt.Errorf("placeholder {%s} holds a space or control character", inner)
	case c.from != costHeader && strings.Contains(field, "."):
		return nil, fmt.Errorf("placeholder {%s}: only top-level fields are supported", inner)
	}
	return c, nil
}

// cost reads the cost from t. Error messages name the field and, for a value
// of the wrong kind, its JSON kind, never an untrusted value: they end up in
// logs and in asynq's record of the archived job. A number is safe to show.
func (c *costTemplate) cost(t *asynq.Task) (int, error) {
	switch c.from {
	case costHeader:
		v, ok := t.Headers()[c.field]
		if !ok || v == "" {
			return 0, fmt.Errorf("cost template %q: header %q is missing or empty", c.tmpl, c.field)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || !isDigits(strings.TrimPrefix(strings.TrimSpace(v), "-")) {
			return 0, fmt.Errorf("cost template %q: header %q is not a whole number", c.tmpl, c.field)
		}
		return wholeCost(c.tmpl, fmt.Sprintf("header %q", c.field), float64(n))
	case costBody:
		fields, err := objectOf(t.Payload())
		if err != nil {
			return 0, fmt.Errorf("cost template %q: payload is not a JSON object", c.tmpl)
		}
		var body string
		if err := json.Unmarshal(fields["body"], &body); err != nil || body == "" {
			return 0, fmt.Errorf("cost template %q: the payload has no \"body\" string", c.tmpl)
		}
		inner, err := objectOf([]byte(body))
		if err != nil {
			return 0, fmt.Errorf("cost template %q: the body is not a JSON object", c.tmpl)
		}
		return numberCost(c.tmpl, fmt.Sprintf("body field %q", c.field), inner[c.field])
	}
	fields, err := objectOf(t.Payload())
	if err != nil {
		return 0, fmt.Errorf("cost template %q: payload is not a JSON object", c.tmpl)
	}
	return numberCost(c.tmpl, fmt.Sprintf("payload field %q", c.field), fields[c.field])
}

// objectOf decodes a JSON object's top-level fields.
func objectOf(data []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return nil, errors.New("not a JSON object")
	}
	return fields, nil
}

// numberCost reads raw, a JSON value, as a cost.
func numberCost(tmpl, what string, raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fmt.Errorf("cost template %q: %s is missing", tmpl, what)
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return 0, fmt.Errorf("cost template %q: %s is not a number (JSON %s)", tmpl, what, jsonKind(c))
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, fmt.Errorf("cost template %q: %s is not a number", tmpl, what)
	}
	return wholeCost(tmpl, what, f)
}

// wholeCost checks that f is a whole number of at least 1 that fits in an int.
func wholeCost(tmpl, what string, f float64) (int, error) {
	switch {
	case f != math.Trunc(f) || math.IsInf(f, 0):
		return 0, fmt.Errorf("cost template %q: %s is %v, not a whole number", tmpl, what, f)
	case f < 0:
		return 0, fmt.Errorf("cost template %q: %s is %v, negative", tmpl, what, f)
	case f < 1:
		return 0, fmt.Errorf("cost template %q: %s is %v: a job costs at least 1", tmpl, what, f)
	case f > maxCost:
		return 0, fmt.Errorf("cost template %q: %s is %v, more than %d", tmpl, what, f, maxCost)
	}
	return int(f), nil
}

// maxCost bounds a cost read from a task; no bucket grants more at once.
const maxCost = 1 << 30

// jsonKind names the kind of the JSON value starting with c.
func jsonKind(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	}
	return "value"
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
