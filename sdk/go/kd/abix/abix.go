// Package abix is a PROPOSED extension of ABI v1 that kube-descheduler's host does not offer yet:
// node taints, pod tolerations and string facts on a reason, which a port of
// RemovePodsViolatingNodeTaints needs (ABI v1 exposes none of them). A module that uses this
// package imports the host functions node_taints, pod_tolerations and reason_string and is
// refused at policy load until the host provides them (docs/wasm-plugins.md, "Writing a plugin
// in Go"). Modules that do not use it are unaffected: Go links a wasmimport only when called.
//
// Proposed host functions (import module kube_descheduler, additive to ABI v1):
//
//	node_taints(node, buf, cap: i32) -> i32
//	    the node's spec.taints as a JSON array of {"key","value","effect"} objects (value ""
//	    when absent), copied as namespace_name copies a name; returns the full length.
//	pod_tolerations(pod, buf, cap: i32) -> i32
//	    the pod's spec.tolerations as a JSON array of {"key","operator","value","effect"}
//	    objects (absent fields ""), as above.
//	reason_string(key_ptr, key_len, value_ptr, value_len: i32) -> i32
//	    0; adds a string fact to the last nomination's reason (as EvictionReason::with(key,
//	    &str) does natively; key as reason_number's, value at most 1,024 bytes of UTF-8).
package abix

import (
	"encoding/json"
	"errors"
	"fmt"

	"kube-descheduler/sdk/go/kd"
)

// Taint is a node taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect"`
}

// String is the taint as kubectl prints it: key=value:Effect (key:Effect without a value).
func (t Taint) String() string {
	if t.Value != "" {
		return t.Key + "=" + t.Value + ":" + t.Effect
	}
	return t.Key + ":" + t.Effect
}

// Toleration is a pod toleration.
type Toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    string `json:"value"`
	Effect   string `json:"effect"`
}

// Tolerates is Kubernetes' ToleratesTaint (with the Lt and Gt operators on canonical integers).
func (t Toleration) Tolerates(taint Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", "Equal":
		return t.Value == taint.Value
	case "Exists":
		return true
	case "Lt", "Gt":
		tv, ok1 := decimal(t.Value)
		v, ok2 := decimal(taint.Value)
		if !ok1 || !ok2 {
			return false
		}
		if t.Operator == "Lt" {
			return v < tv
		}
		return v > tv
	}
	return false
}

func decimal(s string) (int64, bool) {
	d := s
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if d == "" || s == "-0" || (len(d) > 1 && d[0] == '0') {
		return 0, false
	}
	var v int64
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, false
		}
		v = v*10 + int64(d[i]-'0')
	}
	if s[0] == '-' {
		v = -v
	}
	return v, true
}

// Tolerated is whether some toleration tolerates taint.
func Tolerated(tolerations []Toleration, taint Taint) bool {
	for _, t := range tolerations {
		if t.Tolerates(taint) {
			return true
		}
	}
	return false
}

// Host is the extension's host functions; kdtest.Cluster implements it for tests.
type Host interface {
	NodeTaintsJSON(node int) string
	PodTolerationsJSON(pod int) string
	ReasonString(key, value string)
}

var errNoHost = errors.New("abix: the host does not offer node_taints, pod_tolerations and reason_string")

func hostOf(c *kd.Call) (Host, error) {
	if h, ok := c.Host().(Host); ok {
		return h, nil
	}
	if wasm != nil {
		return wasm, nil
	}
	return nil, errNoHost
}

// NodeTaints is node's taints.
func NodeTaints(c *kd.Call, node int) ([]Taint, error) {
	h, err := hostOf(c)
	if err != nil {
		return nil, err
	}
	var out []Taint
	if err := json.Unmarshal([]byte(h.NodeTaintsJSON(node)), &out); err != nil {
		return nil, fmt.Errorf("abix: node_taints: %w", err)
	}
	return out, nil
}

// PodTolerations is pod p's tolerations.
func PodTolerations(c *kd.Call, p kd.Pod) ([]Toleration, error) {
	h, err := hostOf(c)
	if err != nil {
		return nil, err
	}
	var out []Toleration
	if err := json.Unmarshal([]byte(h.PodTolerationsJSON(p.Index())), &out); err != nil {
		return nil, fmt.Errorf("abix: pod_tolerations: %w", err)
	}
	return out, nil
}

// String is a string fact of a reason.
type String struct {
	Key, Value string
}

// Nominate nominates p with reason r and then adds the string facts (reason_string).
func Nominate(c *kd.Call, p kd.Pod, r kd.Reason, strings ...String) error {
	h, err := hostOf(c)
	if err != nil {
		return err
	}
	if err := c.Nominate(p, r); err != nil {
		return err
	}
	for _, s := range strings {
		h.ReasonString(s.Key, s.Value)
	}
	return nil
}
