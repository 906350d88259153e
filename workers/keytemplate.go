package workers

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hibiken/asynq"
)

// Limits of KeyTemplate.
const (
	// MaxKeyTemplate bounds a template, in bytes.
	MaxKeyTemplate = 128
	// MaxKeyPlaceholders bounds the placeholders in a template.
	MaxKeyPlaceholders = 4
	// MaxKeyValue bounds what one placeholder becomes, in bytes.
	MaxKeyValue = 64
)

// KeyTemplate returns a KeyFunc that fills in tmpl from the task. Text outside
// braces is kept as it is; each placeholder in braces is replaced:
//
//	{type}            the task type
//	{payload.<name>}  the top-level field <name> of the task's JSON object payload: a string, or a number as written
//	{header.<name>}   the task header <name>, e.g. {header.sluice-key} for queue.HeaderKey
//
// so that "tenant:{payload.tenant}" gives "tenant:42" for the payload
// {"tenant": "42"}. A missing or empty field, a payload that is not a JSON
// object, or a field that is not a string or number is an error, and the job
// is archived with it (see ErrKey).
//
// The values come from whoever enqueued the task, so they are made safe: each
// becomes at most MaxKeyValue bytes of valid UTF-8 with no '{', '}' or control
// characters. A value that had to be changed or cut keeps a readable head and
// gains '~' and a hash of the whole value, so distinct values keep distinct
// keys. A key therefore never carries a brace, and cannot move its bucket to
// another Redis Cluster slot or into another part of the key layout.
//
// KeyTemplate reports an error for a template longer than MaxKeyTemplate
// bytes, with more than MaxKeyPlaceholders placeholders, unbalanced or nested
// braces, an unknown or empty placeholder, or control characters.
func KeyTemplate(tmpl string) (KeyFunc, error) {
	t, err := parseKeyTemplate(tmpl)
	if err != nil {
		return nil, fmt.Errorf("workers: key template %q: %w", tmpl, err)
	}
	return t.key, nil
}

type placeholder int

const (
	literal placeholder = iota
	typeField
	payloadField
	headerField
)

// segment is a piece of a key template: literal text, or a placeholder with
// the name of its field.
type segment struct {
	kind placeholder
	text string // the literal, or the field name
}

type keyTemplate struct {
	tmpl        string
	segs        []segment
	needPayload bool
}

func parseKeyTemplate(tmpl string) (*keyTemplate, error) {
	switch {
	case tmpl == "":
		return nil, errors.New("empty template")
	case len(tmpl) > MaxKeyTemplate:
		return nil, fmt.Errorf("%d bytes, more than %d", len(tmpl), MaxKeyTemplate)
	case !utf8.ValidString(tmpl):
		return nil, errors.New("not valid UTF-8")
	}
	if i := strings.IndexFunc(tmpl, unicode.IsControl); i >= 0 {
		return nil, fmt.Errorf("control character at byte %d", i)
	}
	t := &keyTemplate{tmpl: tmpl}
	places := 0
	for rest, at := tmpl, 0; rest != ""; {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			t.segs = append(t.segs, segment{kind: literal, text: rest})
			break
		}
		if i > 0 {
			t.segs = append(t.segs, segment{kind: literal, text: rest[:i]})
		}
		if rest[i] == '}' {
			return nil, fmt.Errorf("unmatched '}' at byte %d", at+i)
		}
		j := strings.IndexAny(rest[i+1:], "{}")
		if j < 0 || rest[i+1+j] == '{' {
			return nil, fmt.Errorf("unclosed '{' at byte %d", at+i)
		}
		seg, err := parsePlaceholder(rest[i+1 : i+1+j])
		if err != nil {
			return nil, err
		}
		if places++; places > MaxKeyPlaceholders {
			return nil, fmt.Errorf("more than %d placeholders", MaxKeyPlaceholders)
		}
		t.needPayload = t.needPayload || seg.kind == payloadField
		t.segs = append(t.segs, seg)
		rest, at = rest[i+1+j+1:], at+i+1+j+1
	}
	return t, nil
}

func parsePlaceholder(name string) (segment, error) {
	field := func(kind placeholder, prefix string) (segment, error) {
		f := strings.TrimPrefix(name, prefix)
		switch {
		case f == "":
			return segment{}, fmt.Errorf("placeholder {%s} names no field", name)
		case strings.ContainsFunc(f, unicode.IsSpace):
			return segment{}, fmt.Errorf("placeholder {%s} holds a space", name)
		case kind == payloadField && strings.Contains(f, "."):
			return segment{}, fmt.Errorf("placeholder {%s}: only top-level payload fields are supported", name)
		}
		return segment{kind: kind, text: f}, nil
	}
	switch {
	case name == "type":
		return segment{kind: typeField}, nil
	case strings.HasPrefix(name, "payload."):
		return field(payloadField, "payload.")
	case strings.HasPrefix(name, "header."):
		return field(headerField, "header.")
	}
	return segment{}, fmt.Errorf("unknown placeholder {%s}: want {type}, {payload.<field>} or {header.<name>}", name)
}

// key fills in the template from t. Error messages name fields, never values:
// they end up in logs and in asynq's record of the archived job.
func (k *keyTemplate) key(t *asynq.Task) (string, error) {
	var fields map[string]json.RawMessage
	if k.needPayload {
		if err := json.Unmarshal(t.Payload(), &fields); err != nil || fields == nil {
			return "", fmt.Errorf("key template %q: payload is not a JSON object", k.tmpl)
		}
	}
	var b strings.Builder
	for _, s := range k.segs {
		var v string
		switch s.kind {
		case literal:
			b.WriteString(s.text)
			continue
		case typeField:
			v = t.Type()
		case headerField:
			v = t.Headers()[s.text]
		case payloadField:
			var err error
			if v, err = scalar(fields[s.text]); err != nil {
				return "", fmt.Errorf("key template %q: payload field %q %v", k.tmpl, s.text, err)
			}
		}
		if v == "" {
			what := "task type"
			if s.kind == headerField {
				what = fmt.Sprintf("header %q", s.text)
			} else if s.kind == payloadField {
				what = fmt.Sprintf("payload field %q", s.text)
			}
			return "", fmt.Errorf("key template %q: %s is missing or empty", k.tmpl, what)
		}
		b.WriteString(safeValue(v))
	}
	return b.String(), nil
}

// scalar returns the text of a JSON string or number; "" for an absent field.
func scalar(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", nil
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", errors.New("is not a valid JSON string")
		}
		return s, nil
	case c == '-' || ('0' <= c && c <= '9'):
		return string(raw), nil // json.Unmarshal of the payload has checked it is a number
	case c == 'n':
		return "", nil // null: as absent
	}
	return "", errors.New("is not a string or a number")
}

// safeValue makes an untrusted value fit for a key: valid UTF-8 without
// braces or control characters, at most MaxKeyValue bytes. A value that had
// to change gets '~' and 16 hex digits of its SHA-256, so that two different
// values never end up the same key by accident.
func safeValue(v string) string {
	changed := false
	out := strings.Map(func(r rune) rune {
		if r == '{' || r == '}' || r == utf8.RuneError || unicode.IsControl(r) {
			changed = true
			return '_'
		}
		return r
	}, strings.ToValidUTF8(v, "\uFFFD"))
	if !changed && len(out) <= MaxKeyValue {
		return out
	}
	sum := sha256.Sum256([]byte(v))
	suffix := "~" + hex.EncodeToString(sum[:8])
	return cutUTF8(out, MaxKeyValue-len(suffix)) + suffix
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a rune.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
