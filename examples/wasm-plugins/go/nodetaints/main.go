// RemovePodsViolatingNodeTaints as a Go WebAssembly plugin (Deschedule): evicts pods that do not
// tolerate a NoSchedule taint (and PreferNoSchedule with includePreferNoSchedule) of their node,
// node by node, with the native plugin's reason (code TaintNotTolerated, its text, and the node
// and taint as string facts) and its `plan --explain` sentences.
//
// Args: the native plugin's (upstream v0.36 RemovePodsViolatingNodeTaintsArgs): namespaces,
// labelSelector, includePreferNoSchedule, excludedTaints, includedTaints.
//
// It reads node taints, the pods of the tainted nodes only, pod tolerations and namespaces, and
// gives the node and taint as string facts through ABI v1.1 (node_taints, node_pod_count,
// node_pod_offset, node_pod_column, pod_tolerations, pod_namespace, reason_string).
package main

import (
	"errors"
	"slices"

	"kube-descheduler/sdk/go/kd"
)

// Args are upstream's RemovePodsViolatingNodeTaintsArgs.
type Args struct {
	Namespaces              *kd.Namespaces    `json:"namespaces"`
	LabelSelector           *kd.LabelSelector `json:"labelSelector"`
	IncludePreferNoSchedule bool              `json:"includePreferNoSchedule"`
	ExcludedTaints          []string          `json:"excludedTaints"`
	// IncludedTaints: nil means every taint, an empty list none.
	IncludedTaints *[]string `json:"includedTaints"`
}

// NodeTaints is the plugin.
type NodeTaints struct{}

func init() { kd.Register[Args](NodeTaints{}) }

func main() {}

// Validate applies the native plugin's rules.
func (NodeTaints) Validate(a *Args) error {
	if err := a.Namespaces.Validate(); err != nil {
		return err
	}
	if err := a.LabelSelector.Validate(); err != nil {
		return err
	}
	if len(a.ExcludedTaints) > 0 && a.IncludedTaints != nil && len(*a.IncludedTaints) > 0 {
		return errors.New("args.includedTaints: either includedTaints or excludedTaints can be set, but not both")
	}
	return nil
}

// named is whether set names t by key or by key=value.
func named(set []string, t kd.Taint) bool {
	return slices.Contains(set, t.Key) || (t.Value != "" && slices.Contains(set, t.Key+"="+t.Value))
}

// considered is whether t is a taint the plugin enforces.
func considered(a *Args, t kd.Taint) bool {
	effect := t.Effect == "NoSchedule" || (a.IncludePreferNoSchedule && t.Effect == "PreferNoSchedule")
	return effect && !named(a.ExcludedTaints, t) && (a.IncludedTaints == nil || named(*a.IncludedTaints, t))
}

// untolerated is the first enforced taint of the pod's node the pod does not tolerate.
func untolerated(a *Args, taints []kd.Taint, tolerations []kd.Toleration) (kd.Taint, bool) {
	for _, t := range taints {
		if considered(a, t) && !kd.Tolerated(tolerations, t) {
			return t, true
		}
	}
	return kd.Taint{}, false
}

// enforced is the taints of a node the plugin enforces, in the node's order.
func enforced(a *Args, taints []kd.Taint) []kd.Taint {
	var out []kd.Taint
	for _, t := range taints {
		if considered(a, t) {
			out = append(out, t)
		}
	}
	return out
}

// Deschedule nominates, node by node, the pods that do not tolerate an enforced taint. It reads
// every node's taints, then only the pods of nodes with an enforced taint (Node.Pods: the host
// builds no table of the other pods).
func (NodeTaints) Deschedule(c *kd.Call, a *Args) error {
	for n := 0; n < c.NodeCount(); n++ {
		node := c.Node(n)
		taints := enforced(a, node.Taints())
		if len(taints) == 0 {
			continue
		}
		var name string
		for _, p := range node.Pods() {
			// Succeeded and Failed pods hold no resources and are not considered.
			if ph := p.Phase(); ph == kd.Succeeded || ph == kd.Failed {
				continue
			}
			t, bad := untolerated(a, taints, p.Tolerations())
			if !bad || !a.Namespaces.Allows(p.Namespace()) || !a.LabelSelector.MatchesPod(p) {
				continue
			}
			if name == "" {
				name = node.Name()
			}
			taint := t.String()
			r := kd.Reason{
				Code:    "TaintNotTolerated",
				Text:    name + " taint " + taint + " not tolerated",
				Strings: []kd.StringFact{{Key: "node", Value: name}, {Key: "taint", Value: taint}},
			}
			if err := c.Nominate(p, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Explain is the native plugin's sentence for a pod it does not select.
func (NodeTaints) Explain(c *kd.Call, a *Args, p kd.Pod) (string, error) {
	n := p.Node()
	if n < 0 {
		return "", kd.ErrNoExplanation
	}
	node := c.NodeName(n)
	if t, bad := untolerated(a, c.NodeTaints(n), p.Tolerations()); bad {
		return node + " taint " + t.String() + " is not tolerated, but the plugin's namespaces / labelSelector exclude the pod", nil
	}
	return "it tolerates every taint of " + node + " this plugin enforces", nil
}
