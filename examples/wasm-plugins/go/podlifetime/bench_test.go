package main

import (
	"testing"

	"kube-descheduler/sdk/go/kd"
	"kube-descheduler/sdk/go/kdtest"
)

// BenchmarkDeschedule150k runs the port over 150,000 pods on 5,000 nodes with the in-memory host.
func BenchmarkDeschedule150k(b *testing.B) {
	h := &kdtest.Cluster{Nodes: make([]string, 5000)}
	for i := 0; i < 150_000; i++ {
		h.Pods = append(h.Pods, kdtest.Pod{Namespace: []string{"a", "b", "kube-system"}[i%3], Node: i % 5000,
			Created: now - int64(i*7919)%(40*86400)})
	}
	args := []byte(`{"maxPodLifeTimeSeconds": 864000, "namespaces": {"exclude": ["kube-system"]}}`)
	for b.Loop() {
		h.Nominations = h.Nominations[:0]
		if rc := kd.RunDeschedule(h, args, now); rc != 0 {
			b.Fatal(h.Failed)
		}
	}
	b.ReportMetric(float64(len(h.Nominations)), "nominations")
}
