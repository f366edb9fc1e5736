package kd

import "encoding/json"

// The v1.1 host functions answer with a JSON array of flat objects whose values are strings
// without escapes, integers, booleans or null. decodeFacts reads that shape directly, without
// reflection; anything else (an escape in a string, a fraction, an unexpected token) falls back
// to encoding/json, so the result is always what json.Unmarshal gives.

// flatScanner reads one flat JSON array; ok turns false at the first byte it does not expect.
type flatScanner struct {
	b  []byte
	i  int
	ok bool
}

func (s *flatScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space (0 at the end).
func (s *flatScanner) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// expect consumes c after white space.
func (s *flatScanner) expect(c byte) {
	if s.peek() != c {
		s.ok = false
		return
	}
	s.i++
}

// raw is a string token's bytes (no escapes allowed).
func (s *flatScanner) raw() []byte {
	s.expect('"')
	if !s.ok {
		return nil
	}
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1]
		case c == '\\' || c < 0x20:
			s.ok = false
			return nil
		}
		s.i++
	}
	s.ok = false
	return nil
}

func (s *flatScanner) str() string { return string(s.raw()) }

// literal consumes word (true, false, null) when it comes next.
func (s *flatScanner) literal(word string) bool {
	s.space()
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

func (s *flatScanner) boolean() bool {
	switch {
	case s.literal("true"):
		return true
	case s.literal("false"):
		return false
	}
	s.ok = false
	return false
}

// integer is a JSON integer within [lo, hi] (no fraction, no exponent).
func (s *flatScanner) integer(lo, hi int64) int64 {
	s.space()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if v > (1<<63)/10 {
			s.ok = false
			return 0
		}
		v = v*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || (digits > 1 && s.b[start] == '0') ||
		(s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E')) {
		s.ok = false
		return 0
	}
	n := int64(v)
	if neg {
		n = -n
	}
	if (!neg && v > 1<<63-1) || (neg && v > 1<<63) || n < lo || n > hi {
		s.ok = false
		return 0
	}
	return n
}

// optInt is an integer within [lo, hi] or null (nil).
func (s *flatScanner) optInt(lo, hi int64) *int64 {
	if s.literal("null") {
		return nil
	}
	v := s.integer(lo, hi)
	return &v
}

func (s *flatScanner) optInt32() *int32 {
	p := s.optInt(-1<<31, 1<<31-1)
	if p == nil {
		return nil
	}
	v := int32(*p)
	return &v
}

// decodeFlat reads an array of flat objects, set reading the value of each key into the element
// (and clearing s.ok for a key it does not know).
func decodeFlat[T any](b []byte, set func(t *T, key []byte, s *flatScanner)) ([]T, bool) {
	s := &flatScanner{b: b, ok: true}
	s.expect('[')
	out := []T{}
	if s.peek() == ']' {
		s.i++
	} else {
		for s.ok {
			var t T
			s.expect('{')
			if s.peek() == '}' {
				s.i++
			} else {
				for s.ok {
					key := s.raw()
					s.expect(':')
					if !s.ok {
						break
					}
					set(&t, key, s)
					if s.peek() != ',' {
						s.expect('}')
						break
					}
					s.i++
				}
			}
			out = append(out, t)
			if s.peek() != ',' {
				s.expect(']')
				break
			}
			s.i++
		}
	}
	s.space()
	return out, s.ok && s.i == len(s.b)
}

// decodeFacts is the JSON array b as json.Unmarshal decodes it into a []T, read by set when the
// array has the host's flat shape.
func decodeFacts[T any](b []byte, set func(t *T, key []byte, s *flatScanner)) ([]T, error) {
	if out, ok := decodeFlat(b, set); ok {
		return out, nil
	}
	var out []T
	err := json.Unmarshal(b, &out)
	return out, err
}

func setTaint(t *Taint, key []byte, s *flatScanner) {
	switch string(key) {
	case "key":
		t.Key = s.str()
	case "value":
		t.Value = s.str()
	case "effect":
		t.Effect = s.str()
	default:
		// A key the host does not send: encoding/json decides (it matches keys loosely).
		s.ok = false
	}
}

func setToleration(t *Toleration, key []byte, s *flatScanner) {
	switch string(key) {
	case "key":
		t.Key = s.str()
	case "operator":
		t.Operator = s.str()
	case "value":
		t.Value = s.str()
	case "effect":
		t.Effect = s.str()
	default:
		// A key the host does not send: encoding/json decides (it matches keys loosely).
		s.ok = false
	}
}

func setCondition(c *Condition, key []byte, s *flatScanner) {
	switch string(key) {
	case "type":
		c.Type = s.str()
	case "status":
		c.Status = s.str()
	case "reason":
		c.Reason = s.str()
	case "lastTransitionUnix":
		c.LastTransitionUnix = s.optInt(-1<<63, 1<<63-1)
	default:
		// A key the host does not send: encoding/json decides (it matches keys loosely).
		s.ok = false
	}
}

func setContainer(c *Container, key []byte, s *flatScanner) {
	switch string(key) {
	case "name":
		c.Name = s.str()
	case "kind":
		c.Kind = s.str()
	case "restartCount":
		c.RestartCount = int32(s.integer(-1<<31, 1<<31-1))
	case "ready":
		c.Ready = s.boolean()
	case "waitingReason":
		c.WaitingReason = s.str()
	case "terminatedReason":
		c.TerminatedReason = s.str()
	case "exitCode":
		c.ExitCode = s.optInt32()
	case "lastExitCode":
		c.LastExitCode = s.optInt32()
	default:
		// A key the host does not send: encoding/json decides (it matches keys loosely).
		s.ok = false
	}
}

func setOwner(o *Owner, key []byte, s *flatScanner) {
	switch string(key) {
	case "kind":
		o.Kind = s.str()
	case "name":
		o.Name = s.str()
	case "controller":
		o.Controller = s.boolean()
	default:
		// A key the host does not send: encoding/json decides (it matches keys loosely).
		s.ok = false
	}
}
