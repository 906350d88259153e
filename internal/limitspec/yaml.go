package limitspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// isYAML reports whether path names a YAML limits file, by its extension.
func isYAML(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return true
	}
	return false
}

// yamlToJSON turns a YAML limits file into the JSON document of the same
// schema, so that one decoder checks both and they fail alike:
//
//	limits:
//	  - type: http:request
//	    rate: 50/s
//	    burst: 5
//	  - {type: report, rate: 100/m, policy: sliding-log}
//
// YAML's own errors (bad syntax, a key given twice) say where they are. A
// file holds one document: a second one (after "---") is refused with its
// line, not ignored.
func yamlToJSON(data []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first yaml.Node
	switch err := dec.Decode(&first); {
	case errors.Is(err, io.EOF):
		return nil, invalidf("empty YAML document: want a mapping with \"limits\"")
	case err != nil:
		return nil, yamlError(err)
	}
	var second yaml.Node
	switch err := dec.Decode(&second); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlError(err)
	default:
		return nil, invalidf("a second YAML document at line %d: want one document", second.Line)
	}
	var doc any
	if err := first.Decode(&doc); err != nil {
		return nil, yamlError(err)
	}
	if doc == nil {
		return nil, invalidf("empty YAML document: want a mapping with \"limits\"")
	}
	if err := checkKeys(doc); err != nil {
		return nil, err
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, invalidf("YAML that has no JSON form: %v", err)
	}
	return out, nil
}

// yamlError rewrites an error of the YAML decoder without its "yaml: " prefix.
func yamlError(err error) error {
	return invalidf("bad YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
}

// checkKeys refuses a mapping whose key is not a string (yaml decodes those
// as map[any]any, which has no JSON form).
func checkKeys(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if err := checkKeys(e); err != nil {
				return err
			}
		}
	case map[any]any: // yaml makes one only when a key is not a string
		for k := range v {
			if _, ok := k.(string); !ok {
				return invalidf("YAML key %v is not a string", k)
			}
		}
		return invalidf("a YAML mapping whose keys are not all strings")
	case []any:
		for i, e := range v {
			if err := checkKeys(e); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
	}
	return nil
}
