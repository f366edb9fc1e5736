package main

import (
	"strings"
	"testing"

	"kube-descheduler/sdk/go/kd"
	"kube-descheduler/sdk/go/kdtest"
)

func cluster() *kdtest.Cluster {
	return &kdtest.Cluster{
		Nodes: []string{"n0", "n1", "n2"},
		Taints: [][]kd.Taint{
			{{Key: "dedicated", Value: "batch", Effect: "NoSchedule"}},
			{{Key: "soft", Effect: "PreferNoSchedule"}, {Key: "gone", Effect: "NoExecute"}},
			nil,
		},
		Pods: []kdtest.Pod{
			{Name: "plain", Namespace: "a", Node: 0, Phase: kd.Running},
			{Name: "tolerant", Namespace: "a", Node: 0, Phase: kd.Running,
				Tolerations: []kd.Toleration{{Key: "dedicated", Operator: "Exists"}}},
			{Name: "done", Namespace: "a", Node: 0, Phase: kd.Succeeded},
			{Name: "labelled", Namespace: "b", Node: 0, Phase: kd.Running, Labels: map[string]string{"app": "x"}},
			{Name: "soft", Namespace: "a", Node: 1, Phase: kd.Running},
			{Name: "free", Namespace: "a", Node: 2, Phase: kd.Running},
		},
	}
}

func run(t *testing.T, args string) (*kdtest.Cluster, string) {
	t.Helper()
	h := cluster()
	if rc := kd.RunDeschedule(h, []byte(args), 0); rc != 0 {
		t.Fatalf("%s: failed: %s", args, h.Failed)
	}
	var names []string
	for _, n := range h.Nominations {
		names = append(names, h.Pods[n.Pod].Name)
	}
	return h, strings.Join(names, ",")
}

func TestDecisions(t *testing.T) {
	for args, want := range map[string]string{
		`{}`:                                      "plain,labelled",
		`{"includePreferNoSchedule": true}`:       "plain,labelled,soft",
		`{"excludedTaints": ["dedicated"]}`:       "",
		`{"excludedTaints": ["dedicated=db"]}`:    "plain,labelled",
		`{"excludedTaints": ["dedicated=batch"]}`: "",
		`{"includedTaints": []}`:                  "",
		`{"includedTaints": ["soft"], "includePreferNoSchedule": true}`:                   "soft",
		`{"namespaces": {"exclude": ["b"]}}`:                                              "plain",
		`{"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}`: "labelled",
	} {
		if _, got := run(t, args); got != want {
			t.Errorf("%s: %q, want %q", args, got, want)
		}
	}
	h, _ := run(t, `{}`)
	n := h.Nominations[0]
	if n.Reason.Code != "TaintNotTolerated" || n.Reason.Text != "n0 taint dedicated=batch:NoSchedule not tolerated" ||
		len(n.Reason.Strings) != 2 || n.Reason.Strings[0] != (kd.StringFact{Key: "node", Value: "n0"}) ||
		n.Reason.Strings[1] != (kd.StringFact{Key: "taint", Value: "dedicated=batch:NoSchedule"}) {
		t.Fatalf("%+v", n)
	}
}

func TestRefusedArgs(t *testing.T) {
	h := cluster()
	if rc := kd.RunValidate(h, []byte(`{"excludedTaints": ["a"], "includedTaints": ["b"]}`)); rc == 0 ||
		!strings.Contains(h.Failed, "either includedTaints or excludedTaints") {
		t.Errorf("%q", h.Failed)
	}
}

func TestExplain(t *testing.T) {
	for pod, want := range map[int]string{
		1: "it tolerates every taint of n0 this plugin enforces",
		3: "n0 taint dedicated=batch:NoSchedule is not tolerated, but the plugin's namespaces / labelSelector exclude the pod",
		5: "it tolerates every taint of n2 this plugin enforces",
	} {
		h := cluster()
		if rc := kd.RunExplain(h, []byte(`{"namespaces": {"include": ["a"]}}`), 0, pod); rc != 0 || h.Explained != want {
			t.Errorf("pod %d: %q (%s)", pod, h.Explained, h.Failed)
		}
	}
}
