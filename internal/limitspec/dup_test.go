package limitspec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A field given twice in one JSON object is refused with its line, as YAML
// refuses it, instead of the last one winning ({"rate": "5/s", "rate": "500/s"}
// would start at 500/s).
func TestLoadFileDuplicateField(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"rate twice", "{\"limits\": [\n  {\"type\": \"sleep\", \"rate\": \"5/s\", \"rate\": \"500/s\"}\n]}",
			`"rate" given twice in one object, at line 2, column 36`},
		{"type twice", `{"limits": [{"type": "a", "rate": "1/s"}, {"type": "b", "type": "c", "rate": "1/s"}]}`,
			`"type" given twice in one object, at line 1, column 57`},
		{"weights key twice", "{\"limits\": [{\"type\": \"a\", \"rate\": \"1/s\", \"key\": \"t:{payload.t}\", \"global\": \"5/s\",\n \"weights\": {\"t:x\": 2,\n \"t:x\": 3}}]}",
			`"t:x" given twice in one object, at line 3, column 2`},
		{"rate and Rate", "{\"limits\": [{\"type\": \"sleep\", \"rate\": \"5/s\", \"Rate\": \"500/s\"}]}",
			`"Rate" given twice in one object, at line 1, column 46`},
	}
	for _, tt := range tests {
		path := writeFile(t, tt.content)
		got, err := LoadFile(path)
		require.Error(t, err, tt.name)
		assert.Equal(t, `limits file `+quote(path)+`: `+tt.want, err.Error(), tt.name)
		assert.ErrorIs(t, err, ErrInvalid, tt.name)
		assert.Nil(t, got, tt.name)
	}

	// The same field in two objects is no duplicate, nor are two tenants'
	// keys that differ in case only.
	_, err := LoadFile(writeFile(t, `{"limits": [{"type": "a", "rate": "1/s"}, {"type": "b", "rate": "1/s"}]}`))
	require.NoError(t, err)
	_, err = LoadFile(writeFile(t, `{"limits": [{"type": "a", "rate": "1/s", "key": "t:{payload.t}", "global": "5/s", "weights": {"t:x": 2, "t:X": 3}}]}`))
	require.NoError(t, err)
}

// A YAML file of more than one document is refused with the line where the
// second begins, instead of the first being used and the rest ignored.
func TestLoadFileYAMLMultiDocument(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"two documents", "limits:\n  - {type: a, rate: 5/s}\n---\nlimits:\n  - {type: a, rate: 500/s}\n",
			`a second YAML document at line 3: want one document`},
		{"leading marker, two documents", "---\nlimits: []\n---\nlimits:\n  - {type: a, rate: 500/s}\n",
			`a second YAML document at line 3: want one document`},
		{"an empty second document", "limits: []\n---\n",
			`a second YAML document at line 2: want one document`},
	}
	for _, tt := range tests {
		path := writeNamed(t, "limits.yaml", tt.content)
		got, err := LoadFile(path)
		require.Error(t, err, tt.name)
		assert.Equal(t, `limits file `+quote(path)+`: `+tt.want, err.Error(), tt.name)
		assert.ErrorIs(t, err, ErrInvalid, tt.name)
		assert.Nil(t, got, tt.name)
	}

	// One document, with its markers, is fine.
	got, err := LoadFile(writeNamed(t, "limits.yaml", "---\nlimits:\n  - {type: a, rate: 5/s}\n...\n"))
	require.NoError(t, err)
	require.Len(t, got, 1)
}
