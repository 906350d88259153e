package limitspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxFileSize bounds the limits file LoadFile reads, in bytes.
const MaxFileSize = 1 << 20

// fileEntry is one entry of the limits file: a type, its options, and its
// unnamed limit (rate and the fields after it) or its named ones (limits),
// or both. Pointers tell a field left out from a zero written on purpose,
// which is an error.
type fileEntry struct {
	Type      string         `json:"type"`
	Key       string         `json:"key"`            // key template
	MaxWait   string         `json:"max_wait"`       // Go duration; absent: the worker's default
	Global    string         `json:"global"`         // RATE/UNIT[:BURST]; absent: no global bucket
	InFlight  *flightValue   `json:"in_flight"`      // N or "auto[:[FLOOR-]CEIL]"; absent: no bound
	Adapt     *adaptValue    `json:"adapt"`          // true, false or "key"; absent: on for token-bucket
	Floor     string         `json:"floor"`          // RATE/UNIT; absent: a tenth of the rate
	Fair      *bool          `json:"fair"`           // absent: on with key and global
	Weights   map[string]int `json:"weights"`        // derived key → weight; absent: equal
	Priority  *bool          `json:"priority"`       // absent: on with fair shares, or with priority_floor
	PrioFloor *float64       `json:"priority_floor"` // percent; absent: 5
	fileLimit
	Limits []fileNamed `json:"limits"` // named limits; absent: none
}

// fileLimit is one limit in a file entry: the entry's unnamed one, or one of
// its named ones.
type fileLimit struct {
	Rate     string   `json:"rate"`     // RATE/UNIT, as in a spec
	Policy   string   `json:"policy"`   // absent: token-bucket
	Burst    *int     `json:"burst"`    // token-bucket; absent: the default burst
	Slots    *int     `json:"slots"`    // sliding-window; absent: 10
	Capacity *int     `json:"capacity"` // leaky-bucket; absent: the default, as burst
	Cost     fileCost `json:"cost"`     // a number, or a template string; absent: 1
	Settle   string   `json:"settle"`   // a named limit's settle template; absent: the cost stays charged
}

// fileNamed is one of an entry's named limits.
type fileNamed struct {
	Name string `json:"name"`
	fileLimit
}

// fileCost is a cost as a file writes it: a number, or a template string
// such as "{body.max_tokens}".
type fileCost struct {
	set  bool
	n    int
	tmpl string
}

func (c *fileCost) UnmarshalJSON(b []byte) error {
	c.set = true
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &c.tmpl); err != nil {
			return err
		}
		if !strings.HasPrefix(c.tmpl, "{") {
			return invalidf("cost %s: want a number, or a template such as \"{payload.tokens}\"", quote(c.tmpl))
		}
		return nil
	}
	if len(b) > 0 && b[0] == '{' {
		return invalidf(`cost: want a number or a template string, got an object (in YAML, quote a template: cost: "{payload.tokens}")`)
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return invalidf("cost: want a whole number or a template string, got JSON %s", b)
	}
	c.n = n
	return nil
}

// LoadFile reads the limits file at path, JSON of the form
//
//	{"limits": [
//	  {"type": "http:request", "rate": "50/s", "burst": 5},
//	  {"type": "email:send", "rate": "100/m", "burst": 10, "key": "tenant:{payload.tenant}",
//	   "max_wait": "2s", "cost": 1, "global": "500/s:50", "in_flight": 5},
//	  {"type": "report", "rate": "100/m", "policy": "sliding-log"},
//	  {"type": "http:request", "limits": [
//	    {"name": "requests", "rate": "3000/m"},
//	    {"name": "tokens", "rate": "90000/m", "cost": "{body.max_tokens}",
//	     "settle": "{answer.usage.total_tokens}"}
//	  ]}
//	]}
//
// Each entry holds the fields of a spec (see [Parse]): type and rate are
// required; policy, burst, slots, capacity, key, max_wait, cost, global and
// in_flight may be left out, with the same defaults and the same rules
// (burst for token-bucket, slots for sliding-window, capacity for
// leaky-bucket). cost is a number, or a template string. A type's named
// limits (see [ParseAll]) are a list under it, "limits", each with a name
// and a limit's own fields (rate, policy, burst, slots, capacity, cost,
// and settle, a template of what a job really used: see [Parse]);
// the entry's other fields are the type's, and an entry with "limits" may
// leave out "rate" (with it, the entry has an unnamed limit too). Unknown
// fields, a field given twice in one object, a file without "limits", text
// after the object, two entries for one type and files over [MaxFileSize]
// are errors.
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
	case e.Rate == "" && len(e.Limits) == 0:
		return Spec{}, invalidf(`"rate" is missing or empty (want RATE/UNIT, e.g. "50/s")`)
	}
	o, err := e.opts()
	if err != nil {
		return Spec{}, err
	}
	var parts []part
	if e.Rate != "" {
		pt, err := e.fileLimit.part(e.Type, "")
		if err != nil {
			return Spec{}, err
		}
		parts = append(parts, pt)
	} else if e.Policy != "" || e.Burst != nil || e.Slots != nil || e.Capacity != nil || e.Cost.set {
		return Spec{}, invalidf(`policy, burst, slots, capacity and cost go with "rate" (or in each of "limits")`)
	} else if e.Settle != "" {
		return Spec{}, invalidf(`settle goes with a named limit, in "limits"`)
	}
	for i, l := range e.Limits {
		if l.Name == "" {
			return Spec{}, invalidf(`limits[%d]: "name" is missing or empty`, i)
		}
		pt, err := l.part(e.Type, l.Name)
		if err != nil {
			return Spec{}, invalidf("limits[%d] (name %s): %v", i, quote(l.Name), err)
		}
		parts = append(parts, pt)
	}
	parts[0].opts = o
	return build(parts)
}

// opts reads the options of the entry's type.
func (e fileEntry) opts() (typeOpts, error) {
	var o typeOpts
	give := func(name string) { o.given = append(o.given, name) }
	var err error
	if e.Key != "" {
		give(optKey)
		o.key = e.Key
	}
	if e.MaxWait != "" {
		give(optMaxWait)
		if o.maxWait, err = parseMaxWait(e.MaxWait); err != nil {
			return o, err
		}
	}
	if e.Global != "" {
		give(optGlobal)
		if o.global, err = parseGlobal(e.Global); err != nil {
			return o, err
		}
	}
	if e.InFlight != nil {
		if !e.InFlight.auto && e.InFlight.max < 1 {
			return o, invalidf("in_flight %d must be at least 1 (leave it out for no bound)", e.InFlight.max)
		}
		give(optFlight)
		o.fl = e.InFlight.flight // its upper bound is checked by Validate
	}
	if e.Adapt != nil {
		give(optAdapt)
		o.ad.set, o.ad.on, o.ad.key = true, e.Adapt.on, e.Adapt.key
	}
	if e.Floor != "" {
		give(optFloor)
		if o.ad.floor, o.ad.floorP, err = parseRate(e.Floor); err != nil {
			return o, err
		}
	}
	if e.Fair != nil {
		give(optFair)
		o.fa.set, o.fa.on = true, *e.Fair
	}
	if e.Weights != nil {
		give(optWeights)
		o.fa.weights = e.Weights
	}
	if e.Priority != nil {
		give(optPriority)
		o.pr.set, o.pr.on = true, *e.Priority
	}
	if e.PrioFloor != nil {
		give(optPriorityFloor)
		if o.pr.floor, err = parsePriorityFloor(strconv.FormatFloat(*e.PrioFloor, 'f', -1, 64)); err != nil {
			return o, err
		}
	}
	return o, nil
}

// part reads one limit of type typ, named name.
func (l fileLimit) part(typ, name string) (part, error) {
	if l.Rate == "" {
		return part{}, invalidf(`"rate" is missing or empty (want RATE/UNIT, e.g. "50/s")`)
	}
	r, period, err := parseRate(l.Rate)
	if err != nil {
		return part{}, err
	}
	pt := part{typ: typ, name: name, rate: r, period: period, sh: shape{policy: l.Policy}}
	for _, o := range []struct {
		name string
		v    *int
		to   *int
	}{{optBurst, l.Burst, &pt.sh.burst}, {optSlots, l.Slots, &pt.sh.slots}, {optCapacity, l.Capacity, &pt.sh.capacity}} {
		if o.v != nil {
			if *o.v < 1 {
				return part{}, invalidf("%s %d must be at least 1", o.name, *o.v)
			}
			*o.to = *o.v // the upper bound is checked by Validate
		}
	}
	switch {
	case l.Cost.tmpl != "":
		pt.cost = l.Cost.tmpl
	case l.Cost.set && l.Cost.n < 1:
		return part{}, invalidf("cost %d must be at least 1 (leave it out for 1)", l.Cost.n)
	case l.Cost.set:
		pt.cost = strconv.Itoa(l.Cost.n)
	}
	pt.settle = l.Settle
	return pt, nil
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
		// A field of an embedded fileLimit is named as the file writes it.
		field := strings.ReplaceAll(typ.Field, "fileLimit.", "")
		return invalidf("%s: want %s, got JSON %s", field, typ.Type, typ.Value)
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
