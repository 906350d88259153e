package limitspec

import (
	"bytes"
	"encoding/json"
	"strings"
)

// checkDuplicates refuses a JSON object that names a field twice, anywhere
// in data, with the line and column of the second: encoding/json keeps the
// last silently, so {"rate": "5/s", "rate": "500/s"} would mean 500/s,
// where YAML refuses the same. It matches a field name to a struct field
// without regard to case, so "rate" and "Rate" are one field too, except in
// the objects under "weights", whose keys are tenants' keys (a map): there
// "tenant:A" and "tenant:a" are two. data is valid JSON (checkSyntax).
func checkDuplicates(data []byte) error {
	// frame is one object or array being read; keys is nil for an array.
	type frame struct {
		keys    map[string]bool
		wantKey bool   // an object's next token is a key
		exact   bool   // an object under "weights": keys compared as they are
		last    string // the key whose value is being read
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or an error checkSyntax has reported
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.wantKey {
			if name, ok := tok.(string); ok {
				k := name
				if !top.exact {
					k = strings.ToLower(name)
				}
				if top.keys[k] {
					for start < int64(len(data)) && strings.IndexByte(" \t\r\n:,", data[start]) >= 0 {
						start++
					}
					return invalidf("%s given twice in one object, at %s", quote(name), position(data, start))
				}
				top.keys[k] = true
				top.wantKey, top.last = false, name
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			exact := top != nil && top.keys != nil && strings.EqualFold(top.last, "weights")
			stack = append(stack, &frame{keys: make(map[string]bool), wantKey: true, exact: exact})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				continue
			}
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil {
			top.wantKey = true // a value was read: a key comes next
		}
	}
}
