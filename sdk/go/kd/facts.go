package kd

import "strconv"

// Taint is a node taint (ABI v1.1 node_taints; an absent value is "").
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

// Toleration is a pod toleration (ABI v1.1 pod_tolerations; absent fields are "").
type Toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    string `json:"value"`
	Effect   string `json:"effect"`
}

// Tolerates is Kubernetes' Toleration.ToleratesTaint with the comparison operators Lt and Gt
// (canonical decimal integers), as kube-descheduler's scheduling code decides it.
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
		tv, ok1 := canonicalInt(t.Value)
		v, ok2 := canonicalInt(taint.Value)
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

// canonicalInt parses a decimal integer in canonical form (0, -12, 340: no +, no leading zeros).
func canonicalInt(s string) (int64, bool) {
	d := s
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if d == "" || s == "-0" || (len(d) > 1 && d[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// Tolerated is whether some toleration of tolerations tolerates taint.
func Tolerated(tolerations []Toleration, taint Taint) bool {
	for _, t := range tolerations {
		if t.Tolerates(taint) {
			return true
		}
	}
	return false
}

// Condition is a pod condition (ABI v1.1 pod_conditions; an absent reason is "").
type Condition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Reason string `json:"reason"`
	// LastTransitionUnix is lastTransitionTime in Unix seconds, nil when absent.
	LastTransitionUnix *int64 `json:"lastTransitionUnix"`
}

// The kinds of a Container.
const (
	AppContainer       = "app"
	InitContainer      = "init"
	EphemeralContainer = "ephemeral"
)

// Container is a container's status (ABI v1.1 pod_containers): the app containers, then the init
// containers, then the ephemeral ones.
type Container struct {
	Name string `json:"name"`
	// Kind is AppContainer, InitContainer or EphemeralContainer.
	Kind         string `json:"kind"`
	RestartCount int32  `json:"restartCount"`
	Ready        bool   `json:"ready"`
	// WaitingReason is state.waiting.reason ("" when absent).
	WaitingReason string `json:"waitingReason"`
	// TerminatedReason is state.terminated.reason ("" when absent).
	TerminatedReason string `json:"terminatedReason"`
	// ExitCode is state.terminated.exitCode, nil when the container is not terminated.
	ExitCode *int32 `json:"exitCode"`
	// LastExitCode is lastState.terminated.exitCode, nil when absent.
	LastExitCode *int32 `json:"lastExitCode"`
}

// Owner is an owner reference of a pod (ABI v1.1 pod_owners).
type Owner struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Controller bool   `json:"controller"`
}

// NodeTaints is the taints of node index node of this call.
func (c *Call) NodeTaints(node int) []Taint { return c.host.NodeTaints(node) }

// Tolerations is spec.tolerations.
func (p Pod) Tolerations() []Toleration { return p.c.host.PodTolerations(int(p.i)) }

// Conditions is status.conditions.
func (p Pod) Conditions() []Condition { return p.c.host.PodConditions(int(p.i)) }

// Containers is the statuses of the app, init and ephemeral containers, in that order.
func (p Pod) Containers() []Container { return p.c.host.PodContainers(int(p.i)) }

// Owners is metadata.ownerReferences.
func (p Pod) Owners() []Owner { return p.c.host.PodOwners(int(p.i)) }
