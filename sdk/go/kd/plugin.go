package kd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
)

// Plugin is a WebAssembly plugin whose args decode into A (encoding/json, unknown fields refused).
// It implements Descheduler[A] and/or Balancer[A]; optionally Validator[A] and Explainer[A].
type Plugin[A any] interface{}

// Descheduler is a plugin enabled under plugins.deschedule (the export deschedule).
type Descheduler[A any] interface {
	Deschedule(c *Call, args *A) error
}

// Balancer is a plugin enabled under plugins.balance (the export balance).
type Balancer[A any] interface {
	Balance(c *Call, args *A) error
}

// Validator checks the decoded args once, at policy load (kd_validate): an error refuses the
// policy with its message. The deschedule, balance and explain calls validate again.
type Validator[A any] interface {
	Validate(args *A) error
}

// Explainer answers `plan --explain` (kd_explain): why pod is not selected. An empty text (or
// ErrNoExplanation) gives no explanation.
type Explainer[A any] interface {
	Explain(c *Call, args *A, pod Pod) (string, error)
}

// entry is a registered plugin with its args type erased.
type entry struct {
	validate   func(json []byte) error
	deschedule func(c *Call, json []byte) error
	balance    func(c *Call, json []byte) error
	explain    func(c *Call, json []byte, pod Pod) (string, error)
}

var registered *entry

// Register makes p the module's plugin. Call it from an init function of package main (a
// reactor module runs no main function).
func Register[A any](p Plugin[A]) {
	e := &entry{}
	decode := func(raw []byte) (*A, error) {
		a, err := DecodeArgs[A](raw)
		if err != nil {
			return nil, err
		}
		if v, ok := p.(Validator[A]); ok {
			if err := v.Validate(a); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	e.validate = func(raw []byte) error { _, err := decode(raw); return err }
	if d, ok := p.(Descheduler[A]); ok {
		e.deschedule = func(c *Call, raw []byte) error {
			a, err := decode(raw)
			if err != nil {
				return err
			}
			return d.Deschedule(c, a)
		}
	}
	if b, ok := p.(Balancer[A]); ok {
		e.balance = func(c *Call, raw []byte) error {
			a, err := decode(raw)
			if err != nil {
				return err
			}
			return b.Balance(c, a)
		}
	}
	if x, ok := p.(Explainer[A]); ok {
		e.explain = func(c *Call, raw []byte, pod Pod) (string, error) {
			a, err := decode(raw)
			if err != nil {
				return "", err
			}
			return x.Explain(c, a, pod)
		}
	}
	if e.deschedule == nil && e.balance == nil {
		panic("kd: Register: the plugin implements neither Deschedule nor Balance")
	}
	registered = e
}

// DecodeArgs decodes the policy's args (JSON; null or empty gives the zero A) into a new A,
// refusing unknown fields and trailing data.
func DecodeArgs[A any](raw []byte) (*A, error) {
	a := new(A)
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return a, nil
	}
	d := json.NewDecoder(bytes.NewReader(t))
	d.DisallowUnknownFields()
	if err := d.Decode(a); err != nil {
		return nil, fmt.Errorf("args: %s", trimJSONError(err))
	}
	if d.More() {
		return nil, errors.New("args: trailing data after the JSON value")
	}
	return a, nil
}

func trimJSONError(err error) string {
	s := err.Error()
	const p = "json: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// Export results.
const (
	ok     = 0
	failed = 1
)

// guard runs f, turning a returned error or a panic into the host's fail (the plugin's run fails
// for the cycle with the message; no trap that looks like a crash).
func guard(h Host, f func() error) (rc int32) {
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprintf("panic: %v", r)
			if at := panicSite(debug.Stack()); at != "" {
				msg += " (at " + at + ")"
			}
			h.Fail(msg)
			rc = failed
		}
	}()
	if err := f(); err != nil {
		h.Fail(err.Error())
		return failed
	}
	return ok
}

// panicSite is the function and file:line that panicked, from a goroutine stack.
func panicSite(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "panic(") {
			continue
		}
		// Frames are a function line and a file line; skip the runtime's own (sigpanic, …).
		for j := i + 2; j+1 < len(lines); j += 2 {
			fn := lines[j]
			if strings.HasPrefix(fn, "runtime.") {
				continue
			}
			if k := strings.LastIndexByte(fn, '('); k > 0 {
				fn = fn[:k]
			}
			file := strings.TrimSpace(lines[j+1])
			if k := strings.LastIndex(file, " +0x"); k > 0 {
				file = file[:k]
			}
			return fn + ", " + file
		}
	}
	return ""
}

// RunValidate is what kd_validate does, over any host.
func RunValidate(h Host, args []byte) int32 {
	return guard(h, func() error {
		if registered == nil {
			return errors.New("kd: no plugin registered (call kd.Register from an init function)")
		}
		return registered.validate(args)
	})
}

// RunDeschedule is what the export deschedule does, over any host.
func RunDeschedule(h Host, args []byte, now int64) int32 {
	return guard(h, func() error {
		if registered == nil || registered.deschedule == nil {
			return errors.New("kd: the plugin does not implement Deschedule")
		}
		return registered.deschedule(NewCall(h, now), args)
	})
}

// RunBalance is what the export balance does, over any host.
func RunBalance(h Host, args []byte, now int64) int32 {
	return guard(h, func() error {
		if registered == nil || registered.balance == nil {
			return errors.New("kd: the plugin does not implement Balance")
		}
		return registered.balance(NewCall(h, now), args)
	})
}

// RunExplain is what kd_explain does, over any host.
func RunExplain(h Host, args []byte, now int64, pod int) int32 {
	return guard(h, func() error {
		if registered == nil || registered.explain == nil {
			return nil
		}
		c := NewCall(h, now)
		p, ok := c.explained(pod)
		if !ok {
			return fmt.Errorf("kd: explain: pod index %d is out of range", pod)
		}
		text, err := registered.explain(c, args, p)
		if errors.Is(err, ErrNoExplanation) {
			return nil
		}
		if err != nil {
			return err
		}
		if text != "" {
			h.Explain(text)
		}
		return nil
	})
}
