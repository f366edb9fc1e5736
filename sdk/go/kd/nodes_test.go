package kd_test

import (
	"strings"
	"testing"

	"kube-descheduler/sdk/go/kd"
	"kube-descheduler/sdk/go/kdtest"
)

// counting is a kdtest.Cluster that counts whole-table reads (PodCount, PodColumn).
type counting struct {
	*kdtest.Cluster
	whole int
}

func (c *counting) PodCount() int { c.whole++; return c.Cluster.PodCount() }

func (c *counting) PodColumn(col kd.Column, count int) []int64 {
	c.whole++
	return c.Cluster.PodColumn(col, count)
}

func TestNodePodsReadOnlyTheirNode(t *testing.T) {
	h := &counting{Cluster: cluster()}
	c := kd.NewCall(h, 0)
	n1 := c.Node(1)
	if n1.Index() != 1 || n1.Name() != "n1" || n1.PodCount() != 2 || c.Node(0).PodCount() != 1 {
		t.Fatalf("node 1: %d %q %d pods", n1.Index(), n1.Name(), n1.PodCount())
	}
	var got []string
	for _, p := range n1.Pods() {
		got = append(got, p.Name()+"@"+p.Namespace())
		if p.Node() != 1 || p.Restarts(true) != h.Pods[p.Index()].RestartsWithInit {
			t.Errorf("%s: node %d restarts %d", p.Name(), p.Node(), p.Restarts(true))
		}
	}
	if strings.Join(got, ",") != "b@y,d@y" || n1.Pods()[1].Index() != 2 || n1.Pods()[1].Phase() != kd.Failed {
		t.Fatalf("node 1's pods %v", got)
	}
	if h.whole != 0 {
		t.Fatalf("%d whole-table reads for one node's pods", h.whole)
	}
	if err := c.Nominate(n1.Pods()[1], kd.Reason{}); err != nil {
		t.Fatal(err)
	}
	if len(h.Nominations) != 1 || h.Nominations[0].Pod != 2 {
		t.Fatalf("nominations %v", h.Nominations)
	}
}

type explainer struct{}

func (explainer) Deschedule(*kd.Call, *args) error { return nil }

func (explainer) Explain(c *kd.Call, a *args, p kd.Pod) (string, error) {
	return p.Name() + " on " + c.NodeName(p.Node()), nil
}

func TestExplainReadsOnlyThePodsNode(t *testing.T) {
	kd.Register[args](explainer{})
	h := &counting{Cluster: cluster()}
	if rc := kd.RunExplain(h, nil, 0, 2); rc != 0 || h.Explained != "d on n1" || h.whole != 0 {
		t.Fatalf("rc %d explained %q failed %q, %d whole-table reads", rc, h.Explained, h.Failed, h.whole)
	}
	h = &counting{Cluster: cluster()}
	if rc := kd.RunExplain(h, nil, 0, 3); rc == 0 || !strings.Contains(h.Failed, "index out of range") {
		t.Fatalf("a pod on no node: rc %d failed %q", rc, h.Failed)
	}
	if rc := kd.RunExplain(h, nil, 0, 4); rc == 0 || !strings.Contains(h.Failed, "pod index 4 is out of range") {
		t.Fatalf("rc %d failed %q", rc, h.Failed)
	}
}

func TestKdtestNeedsTableOrderForNodeReads(t *testing.T) {
	h := cluster()
	h.Pods[0], h.Pods[3] = h.Pods[3], h.Pods[0]
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "table order") {
			t.Fatalf("recovered %v", r)
		}
	}()
	h.NodePodOffset(1)
}
