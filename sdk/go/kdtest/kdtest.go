// Package kdtest is an in-memory kube-descheduler host for testing Go plugins with plain
// `go test`: build a Cluster, run the plugin's Deschedule through kd.RunDeschedule (or call the
// plugin's methods on kd.NewCall(cluster, now)), and read the nominations.
package kdtest

import (
	"encoding/json"
	"sort"

	"kube-descheduler/sdk/go/kd"
	"kube-descheduler/sdk/go/kd/abix"
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
	ControllerKind   string
	// Reason is status.reason.
	Reason string
	// Container, init and ephemeral container waiting/terminated reasons.
	ContainerReasons, InitReasons, EphemeralReasons []string
	// Tolerations (proposed extension, package abix).
	Tolerations []abix.Toleration
}

// Nomination is a recorded nomination.
type Nomination struct {
	Pod    int
	Reason kd.Reason
	// Strings are the string facts added by abix.Nominate.
	Strings []abix.String
}

// Cluster is a kd.Host over Nodes and Pods.
type Cluster struct {
	Nodes []string
	// Taints by node index (proposed extension, package abix).
	Taints      [][]abix.Taint
	Pods        []Pod
	Nominations []Nomination
	Explained   string
	Failed      string
	namespaces  []string
}

var (
	_ kd.Host   = (*Cluster)(nil)
	_ abix.Host = (*Cluster)(nil)
)

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
	ns := c.nsIndex()
	for i := 0; i < count; i++ {
		p := c.Pods[i]
		switch col {
		case kd.ColNode:
			out[i] = int64(p.Node)
		case kd.ColCreated:
			out[i] = p.Created
		case kd.ColPhase:
			out[i] = int64(p.Phase)
		case kd.ColRestarts:
			out[i] = p.Restarts
		case kd.ColRestartsWithInit:
			out[i] = p.RestartsWithInit
		case kd.ColNamespace:
			out[i] = int64(sort.SearchStrings(ns, p.Namespace))
		case kd.ColCPURequest:
			out[i] = p.CPURequestMilli
		case kd.ColMemoryRequest:
			out[i] = p.MemoryRequest
		case kd.ColPriority:
			out[i] = int64(p.Priority)
		}
	}
	return out
}

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
	c.Nominations = append(c.Nominations, Nomination{Pod: pod, Reason: r})
}

func (c *Cluster) Explain(text string) { c.Explained = text }

func (c *Cluster) Fail(msg string) { c.Failed = msg }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (c *Cluster) NodeTaintsJSON(node int) string {
	if node < len(c.Taints) && c.Taints[node] != nil {
		return mustJSON(c.Taints[node])
	}
	return "[]"
}

func (c *Cluster) PodTolerationsJSON(pod int) string {
	if t := c.Pods[pod].Tolerations; t != nil {
		return mustJSON(t)
	}
	return "[]"
}

func (c *Cluster) ReasonString(key, value string) {
	last := &c.Nominations[len(c.Nominations)-1]
	last.Strings = append(last.Strings, abix.String{Key: key, Value: value})
}
