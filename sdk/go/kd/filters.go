package kd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Namespaces is the args' `namespaces: {include: [...]}` or `{exclude: [...]}` (not both).
type Namespaces struct {
	Include []string `json:"include"`
	Exclude []string `json:"exclude"`
}

// Validate refuses setting both include and exclude (the native plugins' words).
func (n *Namespaces) Validate() error {
	if n != nil && len(n.Include) > 0 && len(n.Exclude) > 0 {
		return errors.New("args.namespaces: only one of include or exclude namespaces can be set")
	}
	return nil
}

// Allows is whether namespace passes (a nil Namespaces allows every namespace).
func (n *Namespaces) Allows(namespace string) bool {
	if n == nil {
		return true
	}
	if len(n.Include) > 0 {
		return contains(n.Include, namespace)
	}
	return !contains(n.Exclude, namespace)
}

// Mask is Allows for every namespace index of the call.
func (n *Namespaces) Mask(c *Call) []bool {
	names := c.Namespaces()
	m := make([]bool, len(names))
	for i, s := range names {
		m[i] = n.Allows(s)
	}
	return m
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// LabelSelector is a Kubernetes metav1.LabelSelector.
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions"`
}

// LabelSelectorRequirement is one matchExpressions entry.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// Validate checks the selector as kube-descheduler's native plugins do.
func (s *LabelSelector) Validate() error {
	if s == nil {
		return nil
	}
	for _, r := range s.MatchExpressions {
		switch r.Operator {
		case "In", "NotIn":
			if len(r.Values) == 0 {
				return fmt.Errorf("args.labelSelector: values set can't be empty for 'in', 'notin' operators (key %s)", strconv.Quote(r.Key))
			}
		case "Exists", "DoesNotExist":
			if len(r.Values) > 0 {
				return fmt.Errorf("args.labelSelector: values set must be empty for 'exists', 'doesnotexist' operators (key %s)", strconv.Quote(r.Key))
			}
		default:
			return fmt.Errorf("args.labelSelector: %s is not a valid label selector operator", strconv.Quote(r.Operator))
		}
	}
	return nil
}

// Matches is whether the labels label returns match (a nil or empty selector matches all).
func (s *LabelSelector) Matches(label func(key string) (string, bool)) bool {
	if s == nil {
		return true
	}
	for k, v := range s.MatchLabels {
		if got, ok := label(k); !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		got, ok := label(r.Key)
		switch r.Operator {
		case "In":
			if !ok || !contains(r.Values, got) {
				return false
			}
		case "NotIn":
			if ok && contains(r.Values, got) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// MatchesPod is Matches over pod p's labels.
func (s *LabelSelector) MatchesPod(p Pod) bool { return s.Matches(p.Label) }

// Duration writes seconds as kube-descheduler's reasons do: 45s, 12m 5s, 3h 20m, 9d 3h.
func Duration(secs int64) string {
	var buf [32]byte
	return string(AppendDuration(buf[:0], secs))
}

// AppendDuration appends Duration(secs) to b.
func AppendDuration(b []byte, secs int64) []byte {
	if secs < 0 {
		b = append(b, '-')
		secs = -secs
	}
	d, h, m, s := secs/86400, secs%86400/3600, secs%3600/60, secs%60
	unit := func(b []byte, v int64, u byte) []byte { return append(strconv.AppendInt(b, v, 10), u) }
	switch {
	case d > 0:
		b = unit(b, d, 'd')
		if h > 0 {
			b = unit(append(b, ' '), h, 'h')
		}
	case h > 0:
		b = unit(b, h, 'h')
		if m > 0 {
			b = unit(append(b, ' '), m, 'm')
		}
	case m > 0:
		b = unit(b, m, 'm')
		if s > 0 {
			b = unit(append(b, ' '), s, 's')
		}
	default:
		b = unit(b, s, 's')
	}
	return b
}

// DebugList writes strings as Rust's {:?} of a Vec<String> does: ["a", "b"].
func DebugList(list []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range list {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(s))
	}
	b.WriteByte(']')
	return b.String()
}
