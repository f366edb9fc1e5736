package kd

import "time"

// Phase is a pod's status.phase.
type Phase int8

// The phases, as numbered by the PHASE column.
const (
	Pending   Phase = 0
	Running   Phase = 1
	Succeeded Phase = 2
	Failed    Phase = 3
	Unknown   Phase = 4
)

func (p Phase) String() string {
	switch p {
	case Pending:
		return "Pending"
	case Running:
		return "Running"
	case Succeeded:
		return "Succeeded"
	case Failed:
		return "Failed"
	}
	return "Unknown"
}

// Call is one call of the plugin: the cycle's nodes, the pod table and the clock. Columns and
// names are read from the host the first time they are asked for and kept for the call.
type Call struct {
	host Host
	now  int64
	// podCount is the table's length (-1 until asked: the host then builds the whole table);
	// pods is made by the first Pods.
	podCount int
	pods     []Pod
	cols     [numColumns][]int64
	ns       []string
	// nodeCount is the number of given nodes (-1 until asked); nodes holds what Node(i).Pods
	// read, by node index.
	nodeCount int
	nodes     []*nodePods
	// nominated pods, to refuse a second nomination with a clear error.
	nominated map[int32]bool
}

// NewCall makes a call over host at Unix time now. The SDK's exports make one per host call;
// tests make one over a kdtest.Cluster.
func NewCall(host Host, now int64) *Call {
	return &Call{host: host, now: now, podCount: -1, nodeCount: -1}
}

// Host is the call's host.
func (c *Call) Host() Host { return c.host }

// NowUnix is the cycle's clock in Unix seconds (plan --now fixes it).
func (c *Call) NowUnix() int64 { return c.now }

// Now is the cycle's clock. The guest has no other clock: time.Now inside the module is not the
// cycle's time.
func (c *Call) Now() time.Time { return time.Unix(c.now, 0).UTC() }

// Pods is the call's pod table: the pods on the given nodes, node by node, then the pods on no
// given node (Node() == -1).
func (c *Call) Pods() []Pod {
	if c.pods == nil {
		c.pods = make([]Pod, c.PodCount())
		for i := range c.pods {
			c.pods[i] = Pod{c: c, i: int32(i)}
		}
	}
	return c.pods
}

// PodCount is the length of the call's pod table.
func (c *Call) PodCount() int {
	if c.podCount < 0 {
		c.podCount = c.host.PodCount()
	}
	return c.podCount
}

// Pod is pod i of the table.
func (c *Call) Pod(i int) Pod {
	if i < 0 || i >= c.PodCount() {
		panic("kd: pod index out of range")
	}
	return Pod{c: c, i: int32(i)}
}

// NodeCount is the number of nodes given to this call.
func (c *Call) NodeCount() int {
	if c.nodeCount < 0 {
		c.nodeCount = c.host.NodeCount()
	}
	return c.nodeCount
}

// NodeName is the name of node i of this call.
func (c *Call) NodeName(i int) string { return c.host.NodeName(i) }

// Column is a whole column (one host call the first time).
func (c *Call) Column(col Column) []int64 {
	if col < 0 || col >= numColumns {
		panic("kd: unknown column")
	}
	if c.cols[col] == nil {
		c.cols[col] = c.host.PodColumn(col, c.PodCount())
		if c.cols[col] == nil {
			c.cols[col] = []int64{}
		}
	}
	return c.cols[col]
}

// Namespace is the name of namespace index ns.
func (c *Call) Namespace(ns int) string {
	if c.ns == nil {
		c.ns = make([]string, c.host.NamespaceCount())
		for i := range c.ns {
			c.ns[i] = c.host.NamespaceName(i)
		}
	}
	return c.ns[ns]
}

// Namespaces is the call's distinct namespaces, by namespace index.
func (c *Call) Namespaces() []string {
	if c.PodCount() > 0 || c.host.NamespaceCount() > 0 {
		c.Namespace(0)
	}
	return c.ns
}

// Nominate nominates pod p for eviction with reason r (the host copies r: its slices may be
// reused for the next nomination). The host applies the profile's
// DefaultEvictor, the limits and the guard as for a built-in plugin. A pod on no given node, or
// a pod nominated twice, makes the call a malformed answer: Nominate returns an error instead.
func (c *Call) Nominate(p Pod, r Reason) error {
	if p.c != c {
		return errorf("kd: nominate: the pod is not from this call")
	}
	if p.Node() < 0 {
		return errorf("kd: nominate: pod %d is on none of the call's nodes", p.i)
	}
	if c.nominated == nil {
		c.nominated = map[int32]bool{}
	}
	if c.nominated[p.i] {
		return errorf("kd: nominate: pod %d is nominated twice", p.i)
	}
	if err := r.check(); err != nil {
		return err
	}
	c.nominated[p.i] = true
	c.host.Nominate(int(p.i), r)
	return nil
}

// Pod is one pod of the call's table. Its values are read from the host when asked for: for a
// pod from Node.Pods, from its node's columns (unless the whole column was read already).
type Pod struct {
	c *Call
	i int32
	// n is the node index + 1 of a pod from Node.Pods, 0 for a pod from the table.
	n int32
}

// Index is the pod's index in the table.
func (p Pod) Index() int { return int(p.i) }

func (p Pod) col(col Column) int64 {
	if p.n > 0 && p.c.cols[col] == nil {
		np := p.c.nodes[p.n-1]
		return np.column(p.c.host, int(p.n-1), col)[int(p.i)-np.offset]
	}
	return p.c.Column(col)[p.i]
}

// Node is the pod's node index in this call, -1 when on none of the call's nodes.
func (p Pod) Node() int {
	if p.n > 0 {
		return int(p.n - 1)
	}
	return int(p.col(ColNode))
}

// CreatedUnix is metadata.creationTimestamp in Unix seconds; ok is false when absent.
func (p Pod) CreatedUnix() (secs int64, ok bool) {
	v := p.col(ColCreated)
	return v, v != UnknownTime
}

// Created is metadata.creationTimestamp (the zero time when absent).
func (p Pod) Created() time.Time {
	v, ok := p.CreatedUnix()
	if !ok {
		return time.Time{}
	}
	return time.Unix(v, 0).UTC()
}

// Phase is status.phase.
func (p Pod) Phase() Phase { return Phase(p.col(ColPhase)) }

// Restarts is the restarts of the app containers, with the init containers' when withInit.
func (p Pod) Restarts(withInit bool) int64 {
	if withInit {
		return p.col(ColRestartsWithInit)
	}
	return p.col(ColRestarts)
}

// NamespaceIndex is the pod's namespace index.
func (p Pod) NamespaceIndex() int { return int(p.col(ColNamespace)) }

// Namespace is the pod's namespace (for a pod from Node.Pods, asked by name: no namespace
// index is needed).
func (p Pod) Namespace() string {
	if p.n > 0 && p.c.cols[ColNamespace] == nil {
		return p.c.host.PodNamespace(int(p.i))
	}
	return p.c.Namespace(p.NamespaceIndex())
}

// Name is the pod's name.
func (p Pod) Name() string { return p.c.host.PodName(int(p.i)) }

// CPURequestMilli is the requested CPU in millicores.
func (p Pod) CPURequestMilli() int64 { return p.col(ColCPURequest) }

// MemoryRequest is the requested memory in bytes.
func (p Pod) MemoryRequest() int64 { return p.col(ColMemoryRequest) }

// Priority is the pod's priority (0 when unset).
func (p Pod) Priority() int32 { return int32(p.col(ColPriority)) }

// Label is the value of label key and whether the pod has it.
func (p Pod) Label(key string) (string, bool) { return p.c.host.PodLabel(int(p.i), key) }

// ControllerKind is the kind of the pod's controller owner reference and whether it has one.
func (p Pod) ControllerKind() (string, bool) { return p.c.host.PodOwnerKind(int(p.i)) }

// HasState is whether one of the states flags selects (phase, status reason, containers'
// waiting or terminated reasons, optionally of init and ephemeral containers) equals state.
func (p Pod) HasState(flags StateFlags, state string) bool {
	return p.c.host.PodHasState(int(p.i), flags, state)
}
