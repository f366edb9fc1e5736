// Misbehave is a Go WebAssembly plugin that misbehaves on request, for the sandbox tests
// (tests/wasm_go_sandbox.rs): args {mode: alloc | loop | panic | error | nominate-twice | ok}.
//
//   - alloc: allocates without bound (the host's memoryLimit stops it);
//   - loop: never returns (the host's timeout stops it);
//   - panic: panics (the SDK turns it into the plugin's failure with the panic's message);
//   - error: returns an error (the plugin's failure with the error's message);
//   - nominate-twice: nominates the first pod twice (the SDK refuses the second with an error);
//   - ok: nominates the pod args.pod names (namespace/name), code Misbehave; without args.pod,
//     the table's first pod on a node (which the profile's DefaultEvictor may then refuse).
package main

import (
	"errors"
	"fmt"

	"kube-descheduler/sdk/go/kd"
)

// Args select the misbehaviour.
type Args struct {
	Mode string `json:"mode"`
	// Pod is namespace/name of the pod mode ok nominates.
	Pod string `json:"pod"`
}

// Misbehave is the plugin.
type Misbehave struct{}

func init() { kd.Register[Args](Misbehave{}) }

func main() {}

var sink [][]byte

// Validate knows the modes.
func (Misbehave) Validate(a *Args) error {
	switch a.Mode {
	case "alloc", "loop", "panic", "error", "nominate-twice", "ok":
		return nil
	}
	return fmt.Errorf("args.mode: unknown mode %q", a.Mode)
}

// Deschedule misbehaves.
func (Misbehave) Deschedule(c *kd.Call, a *Args) error {
	switch a.Mode {
	case "alloc":
		for {
			b := make([]byte, 1<<20)
			b[0] = 1
			sink = append(sink, b)
		}
	case "loop":
		n := 0
		for {
			n++
			if n < 0 {
				return nil
			}
		}
	case "panic":
		var m map[string]int
		m["boom"]++ // assignment to entry in nil map
	case "error":
		return errors.New("misbehave: asked to fail")
	}
	for _, p := range c.Pods() {
		if p.Node() < 0 || (a.Pod != "" && p.Namespace()+"/"+p.Name() != a.Pod) {
			continue
		}
		r := kd.Reason{Code: "Misbehave", Text: "asked to nominate " + p.Namespace() + "/" + p.Name()}
		if err := c.Nominate(p, r); err != nil {
			return err
		}
		if a.Mode == "nominate-twice" {
			return c.Nominate(p, r)
		}
		return nil
	}
	return nil
}
