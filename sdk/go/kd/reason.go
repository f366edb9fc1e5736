package kd

import (
	"errors"
	"fmt"
)

// Reason is why a pod is nominated: a code (UpperCamelCase, at most 64 bytes; empty: the
// plugin's name), a text (at most 1,024 bytes; empty: the plugin's name), and numbers, flags and
// strings in the order given (at most 8 of them together). Strings use the ABI v1.1 function
// reason_string.
type Reason struct {
	Code    string
	Text    string
	Numbers []Number
	Flags   []Flag
	Strings []StringFact
}

// StringFact is a named string of a reason (a node, a taint), at most 1,024 bytes.
type StringFact struct {
	Key   string
	Value string
}

// Number is a named number of a reason.
type Number struct {
	Key   string
	Value int64
}

// Flag is a named yes/no fact of a reason.
type Flag struct {
	Key   string
	Value bool
}

// Limits of ABI v1.
const (
	MaxReasonText = 1024
	MaxName       = 64
	MaxNumbers    = 8
)

func (r Reason) check() error {
	if len(r.Code) > MaxName {
		return fmt.Errorf("kd: reason code %q is longer than %d bytes", r.Code, MaxName)
	}
	if r.Code != "" && !upperCamel(r.Code) {
		return fmt.Errorf("kd: reason code %q is not UpperCamelCase", r.Code)
	}
	if len(r.Text) > MaxReasonText {
		return fmt.Errorf("kd: reason text of %d bytes, more than %d", len(r.Text), MaxReasonText)
	}
	if n := len(r.Numbers) + len(r.Flags) + len(r.Strings); n > MaxNumbers {
		return fmt.Errorf("kd: %d numbers, flags and strings on one reason, more than %d", n, MaxNumbers)
	}
	for _, s := range r.Strings {
		if len(s.Value) > MaxReasonText {
			return fmt.Errorf("kd: reason string %q of %d bytes, more than %d", s.Key, len(s.Value), MaxReasonText)
		}
	}
	return nil
}

func upperCamel(s string) bool {
	if s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

// ErrNoExplanation may be returned by Explain to give no per-pod explanation.
var ErrNoExplanation = errors.New("kd: no per-pod explanation")
