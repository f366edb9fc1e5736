package kd

import "sort"

// Node is one node given to the call. Its pods are read without the whole pod table: the host
// gives the node's slice of the table (ABI v1.1 node_pod_count, node_pod_offset) and the
// columns of its pods only (node_pod_column).
type Node struct {
	c *Call
	i int
}

// Node is node i of the call (0 <= i < NodeCount()).
func (c *Call) Node(i int) Node {
	if i < 0 || i >= c.NodeCount() {
		panic("kd: node index out of range")
	}
	return Node{c: c, i: i}
}

// Index is the node's index in this call.
func (n Node) Index() int { return n.i }

// Name is the node's name.
func (n Node) Name() string { return n.c.host.NodeName(n.i) }

// Taints is the node's taints.
func (n Node) Taints() []Taint { return n.c.host.NodeTaints(n.i) }

// PodCount is how many of the table's pods are on the node.
func (n Node) PodCount() int { return n.c.nodePods(n.i).count }

// Pods is the node's pods, in table order (their indexes are consecutive). Their values are read
// for this node's pods only, the first time one is asked for.
func (n Node) Pods() []Pod {
	np := n.c.nodePods(n.i)
	if np.pods == nil {
		np.pods = make([]Pod, np.count)
		for k := range np.pods {
			np.pods[k] = Pod{c: n.c, i: int32(np.offset + k), n: int32(n.i + 1)}
		}
	}
	return np.pods
}

// nodePods is what the call read about one node's pods.
type nodePods struct {
	offset, count int
	pods          []Pod
	cols          [numColumns][]int64
}

// nodePods is node i's slice of the table (asked of the host once).
func (c *Call) nodePods(i int) *nodePods {
	if c.nodes == nil {
		c.nodes = make([]*nodePods, c.NodeCount())
	}
	if c.nodes[i] == nil {
		c.nodes[i] = &nodePods{offset: c.host.NodePodOffset(i), count: c.host.NodePodCount(i)}
	}
	return c.nodes[i]
}

// column is column col for the node's pods (one host call the first time).
func (np *nodePods) column(h Host, node int, col Column) []int64 {
	if np.cols[col] == nil {
		np.cols[col] = h.NodePodColumn(node, col, np.count)
		if np.cols[col] == nil {
			np.cols[col] = []int64{}
		}
	}
	return np.cols[col]
}

// explained is table pod i as kd_explain gives it: a pod of its node when it is on a given node
// (found by a binary search over the nodes' offsets, so that its values are read for that node
// only), else a pod of the table; ok is false when i is out of range.
func (c *Call) explained(i int) (p Pod, ok bool) {
	if i < 0 {
		return Pod{}, false
	}
	// The last node whose first index is at or before i holds i, if any node does (an empty
	// node shares its offset with the next one).
	j := sort.Search(c.NodeCount(), func(j int) bool { return c.nodePods(j).offset > i }) - 1
	if j >= 0 {
		if np := c.nodePods(j); i < np.offset+np.count {
			return Pod{c: c, i: int32(i), n: int32(j + 1)}, true
		}
	}
	if i >= c.PodCount() {
		return Pod{}, false
	}
	return Pod{c: c, i: int32(i)}, true
}
