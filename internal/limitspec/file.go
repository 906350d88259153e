package limitspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluicehq/sluice/workers"
)

// MaxFileSize bounds the limits file LoadFile reads, in bytes.
const MaxFileSize = 1 << 20

// fileEntry is one entry of the limits file. Pointers tell a field left out
// from a zero written on purpose, which is an error.
type fileEntry struct {
	Type     string         `json:"type"`
	Rate     string         `json:"rate"`      // RATE/UNIT, as in a spec
	Policy   string         `json:"policy"`    // absent: token-bucket
	Burst    *int           `json:"burst"`     // token-bucket; absent: the default burst
	Slots    *int           `json:"slots"`     // sliding-window; absent: 10
	Capacity *int           `json:"capacity"`  // leaky-bucket; absent: the default, as burst
	Key      string         `json:"key"`       // key template
	MaxWait  string         `json:"max_wait"`  // Go duration; absent: the worker's default
	Cost     *int           `json:"cost"`      // absent: 1
	Global   string         `json:"global"`    // RATE/UNIT[:BURST]; absent: no global bucket
	InFlight *int           `json:"in_flight"` // absent: no bound
	Adapt    *adaptValue    `json:"adapt"`     // true, false or "key"; absent: on for token-bucket
	Floor    string         `json:"floor"`     // RATE/UNIT; absent: a tenth of the rate
	Fair     *bool          `json:"fair"`      // absent: on with key and global
	Weights  map[string]int `json:"weights"`   // derived key → weight; absent: equal
}

// LoadFile reads the limits file at path, JSON of the form
//
//	{"limits": [
//	  {"type": "http:request", "rate": "50/s", "burst": 5},
//	  {"type": "email:send", "rate": "100/m", "burst": 10, "key": "tenant:{payload.tenant}",
//	   "max_wait": "2s", "cost": 1, "global": "500/s:50", "in_flight": 5},
//	  {"type": "report", "rate": "100/m", "policy": "sliding-log"}
//	]}
//
// Each entry holds the fields of a spec (see [Parse]): type and rate are
// required; policy, burst, slots, capacity, key, max_wait, cost, global and
// in_flight may be left out, with the same defaults and the same rules
// (burst for token-bucket, slots for sliding-window, capacity for
// leaky-bucket). Unknown fields, a field given twice in one object, a file
// without "limits", text after the object, two entries for one type and
// files over [MaxFileSize] are errors.
//
// A path ending in .yaml or .yml is read as YAML of the same schema (see
// yamlToJSON): one document; its entries' errors read as a JSON file's would.
//
// The Specs come back in file order and pass [Spec.Validate]. An error names
// the file and, for a bad entry, its index and type, and says where in the
// file a JSON error is; all but I/O errors match [ErrInvalid].
func LoadFile(path string) ([]Spec, error) {
	specs, err := loadFile(path)
	if err != nil {
		return nil, fmt.Errorf("limits file %s: %w", quote(path), err)
	}
	return specs, nil
}

func loadFile(path string) ([]Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err // LoadFile names the path
		}
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, invalidf("larger than %d bytes", MaxFileSize)
	}
	if isYAML(path) {
		if data, err = yamlToJSON(data); err != nil {
			return nil, err
		}
	}
	return parseFile(data)
}

// parseFile decodes the contents of a limits file. It walks the top-level
// object token by token, so that an error inside an entry can name the
// entry's index and keep its offset in the file, and decodes each entry
// refusing unknown fields.
func parseFile(data []byte) ([]Spec, error) {
	if err := checkSyntax(data); err != nil {
		return nil, err
	}
	if err := checkDuplicates(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := expectDelim(dec, data, '{', "a JSON object"); err != nil {
		return nil, err
	}
	var (
		specs []Spec
		found bool
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError(err)
		}
		if name, _ := tok.(string); name != "limits" { // object keys are strings
			return nil, invalidf("unknown field %s", quote(name))
		}
		found = true // a second "limits" was refused by checkDuplicates
		if specs, err = parseEntries(dec, data); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, jsonError(err)
	}
	if off := skipSpace(data, dec.InputOffset()); off < int64(len(data)) {
		return nil, invalidf("unexpected text after the JSON object at %s", position(data, off))
	}
	if !found {
		return nil, invalidf(`no "limits" array, as in {"limits": [{"type": "http:request", "rate": "50/s"}]}`)
	}
	return specs, nil
}

// parseEntries reads the array of entries, the value of "limits".
func parseEntries(dec *json.Decoder, data []byte) ([]Spec, error) {
	if err := expectDelim(dec, data, '[', "an array"); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	specs := []Spec{}
	index := make(map[string]int)
	for i := 0; dec.More(); i++ {
		var e fileEntry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("limits[%d]: %w", i, jsonError(err))
		}
		sp, err := e.spec()
		if err != nil {
			if e.Type != "" {
				return nil, fmt.Errorf("limits[%d] (type %s): %w", i, quote(e.Type), err)
			}
			return nil, fmt.Errorf("limits[%d]: %w", i, err)
		}
		if j, dup := index[sp.Name]; dup {
			return nil, invalidf("limits[%d] and limits[%d] are both for type %s", j, i, quote(sp.Name))
		}
		index[sp.Name] = i
		specs = append(specs, sp)
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, jsonError(err)
	}
	return specs, nil
}

// spec turns an entry into a Spec.
func (e fileEntry) spec() (Spec, error) {
	switch {
	case e.Type == "":
		return Spec{}, invalidf(`"type" is missing or empty`)
	case e.Rate == "":
		return Spec{}, invalidf(`"rate" is missing or empty (want RATE/UNIT, e.g. "50/s")`)
	}
	r, period, err := parseRate(e.Rate)
	if err != nil {
		return Spec{}, err
	}
	sp := Spec{Policy: workers.Policy{Name: e.Type}, KeyTemplate: e.Key}
	sh := shape{policy: e.Policy}
	for _, o := range []struct {
		name string
		v    *int
		to   *int
	}{{optBurst, e.Burst, &sh.burst}, {optSlots, e.Slots, &sh.slots}, {optCapacity, e.Capacity, &sh.capacity}} {
		if o.v != nil {
			if *o.v < 1 {
				return Spec{}, invalidf("%s %d must be at least 1", o.name, *o.v)
			}
			*o.to = *o.v // the upper bound is checked by Validate
		}
	}
	if sp.Limit, err = sh.build(r, period); err != nil {
		return Spec{}, err
	}
	if e.Global != "" {
		g, err := parseGlobal(e.Global)
		if err != nil {
			return Spec{}, err
		}
		sp.Global = g
	}
	var ad adaptive
	if e.Adapt != nil {
		ad.set, ad.on, ad.key = true, e.Adapt.on, e.Adapt.key
	}
	if e.Floor != "" {
		if ad.floor, ad.floorP, err = parseRate(e.Floor); err != nil {
			return Spec{}, err
		}
	}
	if err := ad.apply(&sp); err != nil {
		return Spec{}, err
	}
	if e.MaxWait != "" {
		if sp.MaxWait, err = parseMaxWait(e.MaxWait); err != nil {
			return Spec{}, err
		}
	}
	if e.Cost != nil {
		if *e.Cost < 1 {
			return Spec{}, invalidf("cost %d must be at least 1 (leave it out for 1)", *e.Cost)
		}
		sp.Cost = *e.Cost
	}
	if e.InFlight != nil {
		if *e.InFlight < 1 {
			return Spec{}, invalidf("in_flight %d must be at least 1 (leave it out for no bound)", *e.InFlight)
		}
		sp.InFlight = *e.InFlight // its upper bound is checked by Validate
	}
	fa := fairness{weights: e.Weights}
	if e.Fair != nil {
		fa.set, fa.on = true, *e.Fair
	}
	if err := fa.apply(&sp); err != nil {
		return Spec{}, err
	}
	return sp.finish()
}

// expectDelim reads the next token and reports an error unless it is want.
func expectDelim(dec *json.Decoder, data []byte, want json.Delim, what string) error {
	start := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err)
	}
	// The token is the first byte after white space and a ':' or ','.
	for start < int64(len(data)) && strings.IndexByte(" \t\r\n:,", data[start]) >= 0 {
		start++
	}
	if tok != want {
		return invalidf("want %s at %s", what, position(data, start))
	}
	return nil
}

// checkSyntax reports the first JSON syntax error in data, with its line and
// column. The token-by-token pass that follows cannot say where its syntax
// errors are, so it runs only on valid JSON.
func checkSyntax(data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return invalidf("empty, want a JSON object")
	}
	var raw json.RawMessage
	err := json.Unmarshal(data, &raw)
	var syn *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &syn):
		return jsonError(err)
	case syn.Offset >= int64(len(data)):
		return invalidf("JSON ends too soon, at %s", position(data, int64(len(data))))
	default:
		// Offset counts the bad byte.
		return invalidf("bad JSON at %s: %s", position(data, syn.Offset-1), syn.Error())
	}
}

// jsonError rewrites an error from decoding checked JSON without
// encoding/json's "json: " prefix.
func jsonError(err error) error {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" { // the entry itself
			return invalidf("want an object such as {\"type\": \"http:request\", \"rate\": \"50/s\"}, got JSON %s", typ.Value)
		}
		return invalidf("%s: want %s, got JSON %s", typ.Field, typ.Type, typ.Value)
	}
	return invalidf("%s", strings.TrimPrefix(err.Error(), "json: "))
}

// skipSpace returns the offset of the first byte at or after off that is not
// JSON white space.
func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n", data[off]) >= 0 {
		off++
	}
	return off
}

// position returns "line L, column C" for a byte offset into data.
func position(data []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}
