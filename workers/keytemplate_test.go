package workers_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/workers"
)

func TestKeyTemplate(t *testing.T) {
	long := strings.Repeat("x", 100)
	cases := []struct {
		tmpl    string
		typ     string
		payload string
		headers map[string]string
		want    string
		err     string // a part of the key func's error, if it should fail
	}{
		{tmpl: "static", want: "static"},
		{tmpl: "tenant:{payload.tenant}", payload: `{"tenant": "42"}`, want: "tenant:42"},
		{tmpl: "tenant:{payload.tenant}", payload: `{"tenant": 42}`, want: "tenant:42"},
		{tmpl: "tenant:{payload.tenant}", payload: `{"tenant": -1.5e3}`, want: "tenant:-1.5e3"},
		{tmpl: "{type}/{payload.t}", typ: "email:send", payload: `{"t": "a"}`, want: "email:send/a"},
		{tmpl: "{header.sluice-key}", headers: map[string]string{"sluice-key": "acme"}, want: "acme"},
		{tmpl: "{payload.a}-{payload.b}", payload: `{"a": "x", "b": "y", "c": [1]}`, want: "x-y"},
		{tmpl: "t:{payload.t}", payload: `{"t": "é ü"}`, want: "t:é ü"},
		// Untrusted values lose their braces and control characters, and gain a hash.
		{tmpl: "t:{payload.t}", payload: `{"t": "}{evil}"}`, want: "t:__evil_~"},
		{tmpl: "t:{payload.t}", payload: `{"t": "a\nb"}`, want: "t:a_b~"},
		{tmpl: "t:{header.h}", headers: map[string]string{"h": "\xff\xfe"}, want: "t:_~"},
		{tmpl: "t:{payload.t}", payload: `{"t": "` + long + `"}`, want: "t:" + long[:47] + "~"},
		// Missing and malformed.
		{tmpl: "t:{payload.t}", payload: `{}`, err: `payload field "t" is missing or empty`},
		{tmpl: "t:{payload.t}", payload: `{"t": ""}`, err: `payload field "t" is missing or empty`},
		{tmpl: "t:{payload.t}", payload: `{"t": null}`, err: `payload field "t" is missing or empty`},
		{tmpl: "t:{payload.t}", payload: `{"t": true}`, err: `payload field "t" is not a string or a number`},
		{tmpl: "t:{payload.t}", payload: `{"t": {"u": 1}}`, err: `payload field "t" is not a string or a number`},
		{tmpl: "t:{payload.t}", payload: `[1, 2]`, err: "payload is not a JSON object"},
		{tmpl: "t:{payload.t}", payload: `null`, err: "payload is not a JSON object"},
		{tmpl: "t:{payload.t}", payload: ``, err: "payload is not a JSON object"},
		{tmpl: "t:{header.h}", err: `header "h" is missing or empty`},
	}
	for i, c := range cases {
		key, err := workers.KeyTemplate(c.tmpl)
		require.NoError(t, err, "case %d: %q", i, c.tmpl)
		got, err := key(asynq.NewTaskWithHeaders(or(c.typ, "t"), []byte(c.payload), c.headers))
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, "case %d", i)
			continue
		}
		require.NoError(t, err, "case %d", i)
		if strings.HasSuffix(c.want, "~") {
			// A changed value ends with '~' and 16 hex digits of its hash.
			require.Len(t, got, len(c.want)+16, "case %d: %q", i, got)
			assert.Equal(t, c.want, got[:len(c.want)], "case %d", i)
			continue
		}
		assert.Equal(t, c.want, got, "case %d", i)
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Values that are cleaned to the same text still give different keys.
func TestKeyTemplateKeepsChangedValuesApart(t *testing.T) {
	key, err := workers.KeyTemplate("{payload.t}")
	require.NoError(t, err)
	k1, err := key(asynq.NewTask("t", []byte(`{"t": "a{b"}`)))
	require.NoError(t, err)
	k2, err := key(asynq.NewTask("t", []byte(`{"t": "a}b"}`)))
	require.NoError(t, err)
	assert.NotEqual(t, k1, k2)
	long := strings.Repeat("y", 200)
	k3, err := key(asynq.NewTask("t", []byte(`{"t": "`+long+`"}`)))
	require.NoError(t, err)
	k4, err := key(asynq.NewTask("t", []byte(`{"t": "`+long+`z"}`)))
	require.NoError(t, err)
	assert.NotEqual(t, k3, k4)
	assert.LessOrEqual(t, len(k3), workers.MaxKeyValue)
}

func TestKeyTemplateInvalid(t *testing.T) {
	cases := []struct{ tmpl, err string }{
		{"", "empty template"},
		{"{payload.tenant", "unclosed '{' at byte 0"},
		{"a}b", "unmatched '}' at byte 1"},
		{"{a{b}}", "unclosed '{' at byte 0"},
		{"{}", "unknown placeholder {}"},
		{"{tenant}", "unknown placeholder {tenant}"},
		{"{payload.}", "names no field"},
		{"{header.}", "names no field"},
		{"{payload.a.b}", "only top-level payload fields"},
		{"{payload.a b}", "holds a space"},
		{"t:\n{type}", "control character at byte 2"},
		{"\xff", "not valid UTF-8"},
		{"{type}{type}{type}{type}{type}", "more than 4 placeholders"},
		{strings.Repeat("k", workers.MaxKeyTemplate+1), "more than 128"},
	}
	for _, c := range cases {
		_, err := workers.KeyTemplate(c.tmpl)
		assert.ErrorContains(t, err, c.err, "%q", c.tmpl)
	}
}

// The key func never panics, and no value it is fed can add a brace, a
// control character or invalid UTF-8 to the key, or make it longer than the
// template allows.
func FuzzKeyTemplate(f *testing.F) {
	f.Add("tenant:{payload.tenant}", []byte(`{"tenant": "42"}`), "v")
	f.Add("{type}:{header.h}", []byte(`{}`), "}{\x00")
	f.Add("{payload.a}{payload.b}", []byte(`{"a": "{{", "b": 1e400}`), "")
	f.Add("a{b", []byte(`[]`), "\xff")
	f.Fuzz(func(t *testing.T, tmpl string, payload []byte, header string) {
		key, err := workers.KeyTemplate(tmpl)
		if err != nil {
			return
		}
		typ := "type" + header // untrusted too
		got, err := key(asynq.NewTaskWithHeaders(typ, payload, map[string]string{"h": header, "sluice-key": header}))
		if err != nil {
			if !strings.Contains(err.Error(), "key template") {
				t.Fatalf("error does not say what failed: %v", err)
			}
			return
		}
		if strings.ContainsAny(got, "{}") {
			t.Fatalf("key %q has a brace", got)
		}
		if !utf8.ValidString(got) || strings.ContainsFunc(got, unicode.IsControl) {
			t.Fatalf("key %q is not clean text", got)
		}
		if max := workers.MaxKeyTemplate + workers.MaxKeyPlaceholders*workers.MaxKeyValue; len(got) > max {
			t.Fatalf("key is %d bytes, more than %d", len(got), max)
		}
		if got == "" {
			t.Fatal("empty key without an error")
		}
	})
}

func TestErrorsMatch(t *testing.T) {
	err := error(&workers.HorizonError{Throttled: 25 * 3600e9, Horizon: 24 * 3600e9})
	assert.ErrorIs(t, err, workers.ErrHorizon)
	assert.ErrorIs(t, err, asynq.SkipRetry)
	assert.False(t, errors.Is(err, workers.ErrKey))
	assert.Equal(t, "workers: throttled for 25h0m0s, past the 24h0m0s horizon; archived", err.Error())
}
