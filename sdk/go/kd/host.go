package kd

// Host is the host functions of ABI v1 and v1.1 (import module kube_descheduler) as seen by the
// SDK. Inside a WebAssembly module it is the real host (build tag wasip1); in tests, package
// kdtest offers an in-memory Host, so that a plugin's decisions can be tested with plain
// `go test`.
//
// Every method mirrors one host function of docs/wasm-plugins.md, "ABI v1". A module imports a
// v1.1 function only when the plugin calls the method (Go links a wasmimport only when it is
// used), so a plugin using none of them loads on a host that offers ABI v1 only.
type Host interface {
	NodeCount() int
	PodCount() int
	NamespaceCount() int
	// PodColumn returns column col for pods 0..count-1.
	PodColumn(col Column, count int) []int64
	NamespaceName(ns int) string
	NodeName(node int) string
	PodName(pod int) string
	// PodLabel returns the pod's label value and whether it has the label.
	PodLabel(pod int, key string) (string, bool)
	// PodOwnerKind returns the kind of the pod's controller owner and whether it has one.
	PodOwnerKind(pod int) (string, bool)
	PodHasState(pod int, flags StateFlags, state string) bool
	// NodeTaints is the node's taints (v1.1 node_taints).
	NodeTaints(node int) []Taint
	// PodTolerations is the pod's tolerations (v1.1 pod_tolerations).
	PodTolerations(pod int) []Toleration
	// PodConditions is the pod's conditions (v1.1 pod_conditions).
	PodConditions(pod int) []Condition
	// PodContainers is the pod's container statuses (v1.1 pod_containers).
	PodContainers(pod int) []Container
	// PodOwners is the pod's owner references (v1.1 pod_owners).
	PodOwners(pod int) []Owner
	// NodePodCount is how many pods of node index node the table holds (v1.1 node_pod_count).
	NodePodCount(node int) int
	// NodePodOffset is the table index of the node's first pod; its pods are the indexes
	// offset..offset+NodePodCount(node)-1 (v1.1 node_pod_offset).
	NodePodOffset(node int) int
	// NodePodColumn returns column col for the node's first count pods (v1.1 node_pod_column).
	NodePodColumn(node int, col Column, count int) []int64
	// PodNamespace is the pod's namespace (v1.1 pod_namespace).
	PodNamespace(pod int) string
	// Nominate nominates a pod with its reason (code, text, then numbers, flags and strings
	// (v1.1 reason_string) in order).
	Nominate(pod int, r Reason)
	// Explain answers kd_explain.
	Explain(text string)
	// Fail ends the call with msg; on the real host it does not return.
	Fail(msg string)
}

// Column is a pod column of pod_column.
type Column int32

// The columns of ABI v1.
const (
	ColNode             Column = 0
	ColCreated          Column = 1
	ColPhase            Column = 2
	ColRestarts         Column = 3
	ColRestartsWithInit Column = 4
	ColNamespace        Column = 5
	ColCPURequest       Column = 6
	ColMemoryRequest    Column = 7
	ColPriority         Column = 8
	numColumns                 = 9
)

// StateFlags selects what pod_has_state compares.
type StateFlags int32

// The flags of pod_has_state.
const (
	StatePhase               StateFlags = 1
	StatePodReason           StateFlags = 2
	StateWaiting             StateFlags = 4
	StateTerminated          StateFlags = 8
	StateInitContainers      StateFlags = 16
	StateEphemeralContainers StateFlags = 32
)

// UnknownTime is the CREATED value of a pod without a creation timestamp.
const UnknownTime int64 = -1 << 63

// ABIVersion is the ABI version this SDK speaks.
const ABIVersion = 1
