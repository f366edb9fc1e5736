package main

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"kube-descheduler/sdk/go/kd"
	"kube-descheduler/sdk/go/kdtest"
)

const now = 1_000_000

func cluster() *kdtest.Cluster {
	return &kdtest.Cluster{
		Nodes: []string{"n0", "n1"},
		Pods: []kdtest.Pod{
			{Name: "young", Namespace: "a", Node: 0, Created: now - 3600, ControllerKind: "ReplicaSet"},
			{Name: "old", Namespace: "a", Node: 0, Created: now - 90000, ControllerKind: "ReplicaSet", Labels: map[string]string{"app": "x"}},
			{Name: "older", Namespace: "b", Node: 1, Created: now - 200000, ControllerKind: "Job"},
			{Name: "unknown", Namespace: "b", Node: 1, Created: kd.UnknownTime},
			{Name: "crash", Namespace: "a", Node: 1, Created: now - 60, ContainerReasons: []string{"CrashLoopBackOff"}},
			{Name: "init-crash", Namespace: "a", Node: 1, Created: now - 60, InitReasons: []string{"CrashLoopBackOff"}},
			{Name: "elsewhere", Namespace: "a", Node: -1, Created: 0},
		},
	}
}

func run(t *testing.T, args string) (*kdtest.Cluster, []string) {
	t.Helper()
	h := cluster()
	if rc := kd.RunDeschedule(h, []byte(args), now); rc != 0 {
		t.Fatalf("%s: failed: %s", args, h.Failed)
	}
	var names []string
	for _, n := range h.Nominations {
		names = append(names, h.Pods[n.Pod].Name)
	}
	return h, names
}

func TestOldestFirstWithTheNativeReason(t *testing.T) {
	h, got := run(t, `{"maxPodLifeTimeSeconds": 86400}`)
	if strings.Join(got, ",") != "unknown,older,old" {
		t.Fatalf("%v", got)
	}
	r := h.Nominations[1].Reason
	if r.Code != "PodLifeTimeExceeded" || r.Text != "age 2d 7h > maxPodLifeTimeSeconds 86400 (1d)" ||
		len(r.Numbers) != 2 || r.Numbers[0].Value != 200000 || r.Numbers[1].Value != 86400 {
		t.Fatalf("%+v", r)
	}
	if r := h.Nominations[0].Reason; r.Text != "age unknown > maxPodLifeTimeSeconds 86400 (1d)" || len(r.Numbers) != 1 {
		t.Fatalf("%+v", r)
	}
}

func TestFilters(t *testing.T) {
	for args, want := range map[string]string{
		`{"maxPodLifeTimeSeconds": 86400, "namespaces": {"include": ["a"]}}`:                              "old",
		`{"maxPodLifeTimeSeconds": 86400, "labelSelector": {"matchLabels": {"app": "x"}}}`:                "old",
		`{"maxPodLifeTimeSeconds": 86400, "ownerKinds": {"exclude": ["Job"]}}`:                            "unknown,old",
		`{"maxPodLifeTimeSeconds": 86400, "ownerKinds": {"include": ["Job"]}}`:                            "older",
		`{"states": ["CrashLoopBackOff"]}`:                                                                "crash",
		`{"states": ["CrashLoopBackOff"], "includingInitContainers": true}`:                               "crash,init-crash",
		`{"maxPodLifeTimeSeconds": 30, "states": ["CrashLoopBackOff"], "namespaces": {"exclude": ["b"]}}`: "crash",
	} {
		if _, got := run(t, args); strings.Join(got, ",") != want {
			t.Errorf("%s: %v, want %s", args, got, want)
		}
	}
	h, _ := run(t, `{"states": ["CrashLoopBackOff", "Failed"]}`)
	if r := h.Nominations[0].Reason; r.Text != `age 1m; in one of the states ["CrashLoopBackOff", "Failed"]` {
		t.Errorf("%q", r.Text)
	}
}

func TestConditionsAndExitCodes(t *testing.T) {
	at := func(v int64) *int64 { return &v }
	code := func(v int32) *int32 { return &v }
	h := &kdtest.Cluster{
		Nodes: []string{"n0"},
		Pods: []kdtest.Pod{
			{Name: "unready-long", Namespace: "a", Created: now - 10, Conditions: []kd.Condition{
				{Type: "Ready", Status: "False", Reason: "ContainersNotReady", LastTransitionUnix: at(now - 700)}}},
			{Name: "unready-short", Namespace: "a", Created: now - 20, Conditions: []kd.Condition{
				{Type: "Ready", Status: "False", LastTransitionUnix: at(now - 100)}}},
			{Name: "unready-no-time", Namespace: "a", Created: now - 30, Conditions: []kd.Condition{
				{Type: "Ready", Status: "False"}}},
			{Name: "exit-1", Namespace: "a", Created: now - 40, Containers: []kd.Container{
				{Kind: kd.AppContainer, ExitCode: code(1)}}},
			{Name: "init-exit-1", Namespace: "a", Created: now - 50, Containers: []kd.Container{
				{Kind: kd.InitContainer, ExitCode: code(1)}, {Kind: kd.EphemeralContainer, ExitCode: code(2)}}},
			{Name: "owned", Namespace: "a", Created: now - 60, Owners: []kd.Owner{
				{Kind: "Workflow"}, {Kind: "ReplicaSet", Controller: true}}},
		},
	}
	for args, want := range map[string]string{
		`{"conditions": [{"type": "Ready", "status": "False"}]}`:                          "unready-no-time,unready-short,unready-long",
		`{"conditions": [{"status": "False", "minTimeSinceLastTransitionSeconds": 600}]}`: "unready-long",
		`{"conditions": [{"reason": "ContainersNotReady"}, {"type": "Gone"}]}`:            "unready-long",
		`{"exitCodes": [1]}`: "exit-1",
		`{"exitCodes": [1, 2], "includingInitContainers": true}`:                                    "init-exit-1,exit-1",
		`{"exitCodes": [2], "includingInitContainers": true, "includingEphemeralContainers": true}`: "",
		`{"maxPodLifeTimeSeconds": 1, "ownerKinds": {"include": ["Workflow"]}}`:                     "owned",
		`{"maxPodLifeTimeSeconds": 1, "ownerKinds": {"exclude": ["Workflow"]}}`:                     "init-exit-1,exit-1,unready-no-time,unready-short,unready-long",
	} {
		h.Nominations = nil
		if rc := kd.RunDeschedule(h, []byte(args), now); rc != 0 {
			t.Fatalf("%s: %s", args, h.Failed)
		}
		var got []string
		for _, n := range h.Nominations {
			got = append(got, h.Pods[n.Pod].Name)
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%s: %v, want %s", args, got, want)
		}
	}
}

func TestRefusedArgs(t *testing.T) {
	for args, want := range map[string]string{
		`{}`: "at least one filtering criterion",
		`{"conditions": [{"type": "Ready"}, {}]}`: "args.conditions[1]: at least one of type",
		`{"states": ["Sleeping"]}`:                "states must be one of",
		`{"maxPodLifeTimeSeconds": 1, "ownerKinds": {"include": ["A"], "exclude": ["B"]}}`: "only one of Include/Exclude",
		`{"maxPodLifeTimeSeconds": -1}`: "cannot unmarshal",
		`{"maxPodLifeTime": 1}`:         `unknown field "maxPodLifeTime"`,
	} {
		h := cluster()
		if rc := kd.RunValidate(h, []byte(args)); rc == 0 || !strings.Contains(h.Failed, want) {
			t.Errorf("%s: %q, want %q", args, h.Failed, want)
		}
	}
}

func TestExplain(t *testing.T) {
	for pod, want := range map[int]string{
		0: "age 1h <= maxPodLifeTimeSeconds 86400 (1d)",
		2: "its namespace, labels, states, conditions or owner kind do not match the plugin's args",
		3: "its namespace, labels, states, conditions or owner kind do not match the plugin's args",
	} {
		h := cluster()
		if rc := kd.RunExplain(h, []byte(`{"maxPodLifeTimeSeconds": 86400}`), now, pod); rc != 0 || h.Explained != want {
			t.Errorf("pod %d: %q (%s)", pod, h.Explained, h.Failed)
		}
	}
}

// TestOldestFirstOrder checks the packed-key sort against the comparison sort, with equal times,
// and with an unknown time (the comparison sort then decides).
func TestOldestFirstOrder(t *testing.T) {
	byCompare := func(picked []pick) []pick {
		out := slices.Clone(picked)
		slices.SortFunc(out, func(x, y pick) int {
			if x.created != y.created {
				return cmp.Compare(x.created, y.created)
			}
			return cmp.Compare(x.pod, y.pod)
		})
		return out
	}
	for _, extra := range []int64{0, kd.UnknownTime, now + 1<<33} {
		var picked []pick
		for i := int32(0); i < 5000; i++ {
			picked = append(picked, pick{created: now - int64(i*7919)%(40*86400) - int64(i%97), pod: 4999 - i})
		}
		if extra != 0 {
			picked = append(picked, pick{created: extra, pod: 5000})
		}
		want := byCompare(picked)
		oldestFirst(picked)
		if !slices.Equal(picked, want) {
			t.Fatalf("extra %d: the packed sort differs from the comparison sort", extra)
		}
	}
}
