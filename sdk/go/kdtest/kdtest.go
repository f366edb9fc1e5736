// Package kdtest is an in-memory kube-descheduler host for testing Go plugins with plain
// `go test`: build a Cluster, run the plugin's Deschedule through kd.RunDeschedule (or call the
// plugin's methods on kd.NewCall(cluster, now)), and read the nominations.
package kdtest

import (
	"sort"

	"kube-descheduler/sdk/go/kd"
)

// Pod is a pod of the test table.
type Pod struct {
	Name      string
	Namespace string
	// Node is the node index in the call, -1 for a pod on none of the call's nodes.
	Node int
	// Created is the creation time in Unix seconds; kd.UnknownTime when absent.
	Created          int64
	Phase            kd.Phase
	Restarts         int64
	RestartsWithInit int64
	CPURequestMilli  int64
	MemoryRequest    int64
	Priority         int32
	Labels           map[string]string
	// ControllerKind is the kind of the controller owner; PodOwners gives Owners when set, else
	// this one as the only (controller) owner.
	ControllerKind string
	Owners         []kd.Owner
	// Reason is status.reason.
	Reason string
	// Container, init and ephemeral container waiting/terminated reasons.
	ContainerReasons, InitReasons, EphemeralReasons []string
	Tolerations                                     []kd.Toleration
	Conditions                                      []kd.Condition
	// Containers are the container statuses PodContainers gives (v1.1).
	Containers []kd.Container
}

// Nomination is a recorded nomination.
type Nomination struct {
	Pod    int
	Reason kd.Reason
}

// Cluster is a kd.Host over Nodes and Pods. Pods are the table: in table order (node by node,
// then the pods on no node), as the real host gives them; the node functions (Node.Pods,
// kd_explain) panic on another order.
type Cluster struct {
	Nodes []string
	// Taints by node index.
	Taints      [][]kd.Taint
	Pods        []Pod
	Nominations []Nomination
	Explained   string
	Failed      string
	namespaces  []string
}

var _ kd.Host = (*Cluster)(nil)

func (c *Cluster) nsIndex() []string {
	if c.namespaces == nil {
		seen := map[string]bool{}
		for _, p := range c.Pods {
			if !seen[p.Namespace] {
				seen[p.Namespace] = true
				c.namespaces = append(c.namespaces, p.Namespace)
			}
		}
		sort.Strings(c.namespaces)
	}
	return c.namespaces
}

func (c *Cluster) NodeCount() int      { return len(c.Nodes) }
func (c *Cluster) PodCount() int       { return len(c.Pods) }
func (c *Cluster) NamespaceCount() int { return len(c.nsIndex()) }

func (c *Cluster) PodColumn(col kd.Column, count int) []int64 {
	out := make([]int64, count)
	for i := range out {
		out[i] = c.value(i, col)
	}
	return out
}

// value is column col of pod i.
func (c *Cluster) value(i int, col kd.Column) int64 {
	p := c.Pods[i]
	switch col {
	case kd.ColNode:
		return int64(p.Node)
	case kd.ColCreated:
		return p.Created
	case kd.ColPhase:
		return int64(p.Phase)
	case kd.ColRestarts:
		return p.Restarts
	case kd.ColRestartsWithInit:
		return p.RestartsWithInit
	case kd.ColNamespace:
		return int64(sort.SearchStrings(c.nsIndex(), p.Namespace))
	case kd.ColCPURequest:
		return p.CPURequestMilli
	case kd.ColMemoryRequest:
		return p.MemoryRequest
	case kd.ColPriority:
		return int64(p.Priority)
	}
	return 0
}

// nodeSlice is the table indexes of node's pods. The node functions need Pods in table order
// (node by node, then the pods on no node), as the real host gives them; a Cluster in another
// order panics with a sentence saying so.
func (c *Cluster) nodeSlice(node int) (offset, count int) {
	last := 0
	for i, p := range c.Pods {
		at := p.Node
		if at < 0 {
			at = len(c.Nodes)
		}
		if at < last {
			panic("kdtest: the node functions need Cluster.Pods in table order (node by node, then the pods on no node)")
		}
		last = at
		if at < node {
			offset = i + 1
		}
		if p.Node == node {
			count++
		}
	}
	return offset, count
}

func (c *Cluster) NodePodCount(node int) int {
	_, n := c.nodeSlice(node)
	return n
}

func (c *Cluster) NodePodOffset(node int) int {
	off, _ := c.nodeSlice(node)
	return off
}

func (c *Cluster) NodePodColumn(node int, col kd.Column, count int) []int64 {
	off, n := c.nodeSlice(node)
	if count > n {
		panic("kdtest: NodePodColumn: count exceeds the node's pods")
	}
	out := make([]int64, count)
	for k := range out {
		out[k] = c.value(off+k, col)
	}
	return out
}

func (c *Cluster) PodNamespace(pod int) string { return c.Pods[pod].Namespace }

func (c *Cluster) NamespaceName(ns int) string { return c.nsIndex()[ns] }
func (c *Cluster) NodeName(node int) string    { return c.Nodes[node] }
func (c *Cluster) PodName(pod int) string      { return c.Pods[pod].Name }

func (c *Cluster) PodLabel(pod int, key string) (string, bool) {
	v, ok := c.Pods[pod].Labels[key]
	return v, ok
}

func (c *Cluster) PodOwnerKind(pod int) (string, bool) {
	k := c.Pods[pod].ControllerKind
	return k, k != ""
}

func (c *Cluster) PodHasState(pod int, flags kd.StateFlags, state string) bool {
	p := c.Pods[pod]
	if flags&kd.StatePhase != 0 && p.Phase.String() == state {
		return true
	}
	if flags&kd.StatePodReason != 0 && p.Reason == state {
		return true
	}
	if flags&(kd.StateWaiting|kd.StateTerminated) == 0 {
		return false
	}
	has := func(list []string) bool {
		for _, s := range list {
			if s == state {
				return true
			}
		}
		return false
	}
	return has(p.ContainerReasons) ||
		(flags&kd.StateInitContainers != 0 && has(p.InitReasons)) ||
		(flags&kd.StateEphemeralContainers != 0 && has(p.EphemeralReasons))
}

func (c *Cluster) Nominate(pod int, r kd.Reason) {
	r.Numbers = append([]kd.Number(nil), r.Numbers...)
	r.Flags = append([]kd.Flag(nil), r.Flags...)
	r.Strings = append([]kd.StringFact(nil), r.Strings...)
	c.Nominations = append(c.Nominations, Nomination{Pod: pod, Reason: r})
}

func (c *Cluster) Explain(text string) { c.Explained = text }

func (c *Cluster) Fail(msg string) { c.Failed = msg }

// NodeTaints is Taints[node] (none when absent).
func (c *Cluster) NodeTaints(node int) []kd.Taint {
	if node < len(c.Taints) {
		return c.Taints[node]
	}
	return nil
}

func (c *Cluster) PodTolerations(pod int) []kd.Toleration { return c.Pods[pod].Tolerations }
func (c *Cluster) PodConditions(pod int) []kd.Condition   { return c.Pods[pod].Conditions }
func (c *Cluster) PodContainers(pod int) []kd.Container   { return c.Pods[pod].Containers }

func (c *Cluster) PodOwners(pod int) []kd.Owner {
	p := c.Pods[pod]
	if p.Owners == nil && p.ControllerKind != "" {
		return []kd.Owner{{Kind: p.ControllerKind, Controller: true}}
	}
	return p.Owners
}
