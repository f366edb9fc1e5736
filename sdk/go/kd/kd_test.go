package kd_test

import (
	"strings"
	"testing"

	"kube-descheduler/sdk/go/kd"
	"kube-descheduler/sdk/go/kdtest"
)

type args struct {
	Min        int64          `json:"min"`
	Namespaces *kd.Namespaces `json:"namespaces"`
	Panic      bool           `json:"panic"`
}

type plugin struct{}

func (plugin) Validate(a *args) error { return a.Namespaces.Validate() }

func (plugin) Deschedule(c *kd.Call, a *args) error {
	if a.Panic {
		var p *args
		_ = p.Min
	}
	mask := a.Namespaces.Mask(c)
	for _, p := range c.Pods() {
		if p.Node() >= 0 && mask[p.NamespaceIndex()] && p.Restarts(true) >= a.Min {
			r := kd.Reason{Code: "Restarts", Text: p.Namespace() + "/" + p.Name(),
				Numbers: []kd.Number{{Key: "restarts", Value: p.Restarts(true)}}}
			if err := c.Nominate(p, r); err != nil {
				return err
			}
		}
	}
	return nil
}

func (plugin) Explain(c *kd.Call, a *args, p kd.Pod) (string, error) {
	return "restarts below " + kd.Duration(a.Min), nil
}

func cluster() *kdtest.Cluster {
	return &kdtest.Cluster{
		Nodes: []string{"n0", "n1"},
		Pods: []kdtest.Pod{
			{Name: "a", Namespace: "x", Node: 0, RestartsWithInit: 5, Created: 100},
			{Name: "b", Namespace: "y", Node: 1, RestartsWithInit: 1, Created: kd.UnknownTime},
			{Name: "d", Namespace: "y", Node: 1, RestartsWithInit: 7, Phase: kd.Failed,
				Labels: map[string]string{"app": "web"}, ControllerKind: "ReplicaSet"},
			{Name: "c", Namespace: "x", Node: -1, RestartsWithInit: 9},
		},
	}
}

func TestDeschedule(t *testing.T) {
	kd.Register[args](plugin{})
	h := cluster()
	if rc := kd.RunDeschedule(h, []byte(`{"min": 5}`), 1000); rc != 0 || h.Failed != "" {
		t.Fatalf("rc %d, failed %q", rc, h.Failed)
	}
	var got []string
	for _, n := range h.Nominations {
		got = append(got, n.Reason.Text)
	}
	if strings.Join(got, ",") != "x/a,y/d" {
		t.Fatalf("nominations %v", got)
	}
	if n := h.Nominations[1].Reason.Numbers; len(n) != 1 || n[0] != (kd.Number{Key: "restarts", Value: 7}) {
		t.Fatalf("numbers %v", n)
	}
}

func TestArgsAndFailures(t *testing.T) {
	kd.Register[args](plugin{})
	for _, tc := range []struct{ args, fail string }{
		{`{"min": 1, "bogus": 2}`, `args: unknown field "bogus"`},
		{`{"min": "x"}`, `args: cannot unmarshal string into Go struct field args.min of type int64`},
		{`{"namespaces": {"include": ["a"], "exclude": ["b"]}}`, "only one of include or exclude"},
		{`{"min": 1} {}`, "trailing data"},
		{`{"panic": true}`, "panic: runtime error: invalid memory address or nil pointer dereference (at kube-descheduler/sdk/go/kd_test.plugin.Deschedule, "},
	} {
		h := cluster()
		if rc := kd.RunDeschedule(h, []byte(tc.args), 0); rc == 0 || !strings.Contains(h.Failed, tc.fail) {
			t.Errorf("%s: rc %d, failed %q, want %q", tc.args, rc, h.Failed, tc.fail)
		}
		if len(h.Nominations) != 0 {
			t.Errorf("%s: nominated %v", tc.args, h.Nominations)
		}
	}
	h := cluster()
	if rc := kd.RunValidate(h, []byte("null")); rc != 0 {
		t.Errorf("null args: %q", h.Failed)
	}
	if rc := kd.RunBalance(h, nil, 0); rc == 0 || !strings.Contains(h.Failed, "does not implement Balance") {
		t.Errorf("balance: %q", h.Failed)
	}
}

func TestExplain(t *testing.T) {
	kd.Register[args](plugin{})
	h := cluster()
	if rc := kd.RunExplain(h, []byte(`{"min": 90}`), 0, 1); rc != 0 || h.Explained != "restarts below 1m 30s" {
		t.Fatalf("rc %d explained %q failed %q", rc, h.Explained, h.Failed)
	}
	if rc := kd.RunExplain(h, nil, 0, 9); rc == 0 {
		t.Fatal("an out-of-range pod explained")
	}
}

func TestPodValues(t *testing.T) {
	c := kd.NewCall(cluster(), 1000)
	a, b, d := c.Pod(0), c.Pod(1), c.Pod(2)
	if s, ok := a.CreatedUnix(); !ok || s != 100 || a.Created().Unix() != 100 {
		t.Errorf("created %d %v", s, ok)
	}
	if _, ok := b.CreatedUnix(); ok || !b.Created().IsZero() {
		t.Error("unknown creation time")
	}
	if d.Phase() != kd.Failed || d.Phase().String() != "Failed" || d.Namespace() != "y" {
		t.Errorf("phase %v ns %s", d.Phase(), d.Namespace())
	}
	if k, ok := d.ControllerKind(); !ok || k != "ReplicaSet" {
		t.Error("owner kind")
	}
	if _, ok := a.ControllerKind(); ok {
		t.Error("no owner")
	}
	if v, ok := d.Label("app"); !ok || v != "web" {
		t.Error("label")
	}
	if !d.HasState(kd.StatePhase, "Failed") || d.HasState(kd.StatePodReason, "Failed") {
		t.Error("state")
	}
	if c.Now().Unix() != 1000 || c.NodeName(1) != "n1" || c.NodeCount() != 2 {
		t.Error("call values")
	}
	if err := c.Nominate(c.Pod(3), kd.Reason{}); err == nil {
		t.Error("nominated a pod on no node")
	}
	if err := c.Nominate(a, kd.Reason{Code: "lower"}); err == nil {
		t.Error("accepted a code that is not UpperCamelCase")
	}
	if err := c.Nominate(a, kd.Reason{Text: strings.Repeat("x", 1025)}); err == nil {
		t.Error("accepted a 1,025-byte text")
	}
	if err := c.Nominate(a, kd.Reason{}); err != nil {
		t.Error(err)
	}
	if err := c.Nominate(a, kd.Reason{}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second nomination: %v", err)
	}
}

func TestLabelSelector(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "front", "empty": ""}
	get := func(k string) (string, bool) { v, ok := labels[k]; return v, ok }
	for _, tc := range []struct {
		sel  *kd.LabelSelector
		want bool
	}{
		{nil, true},
		{&kd.LabelSelector{}, true},
		{&kd.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, true},
		{&kd.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, false},
		{&kd.LabelSelector{MatchExpressions: []kd.LabelSelectorRequirement{{Key: "tier", Operator: "In", Values: []string{"back", "front"}}}}, true},
		{&kd.LabelSelector{MatchExpressions: []kd.LabelSelectorRequirement{{Key: "tier", Operator: "NotIn", Values: []string{"front"}}}}, false},
		{&kd.LabelSelector{MatchExpressions: []kd.LabelSelectorRequirement{{Key: "nope", Operator: "NotIn", Values: []string{"x"}}}}, true},
		{&kd.LabelSelector{MatchExpressions: []kd.LabelSelectorRequirement{{Key: "empty", Operator: "Exists"}}}, true},
		{&kd.LabelSelector{MatchExpressions: []kd.LabelSelectorRequirement{{Key: "app", Operator: "DoesNotExist"}}}, false},
		{&kd.LabelSelector{MatchExpressions: []kd.LabelSelectorRequirement{{Key: "nope", Operator: "In", Values: []string{""}}}}, false},
	} {
		if got := tc.sel.Matches(get); got != tc.want {
			t.Errorf("%+v: %v", tc.sel, got)
		}
	}
	bad := &kd.LabelSelector{MatchExpressions: []kd.LabelSelectorRequirement{{Key: "a", Operator: "In"}}}
	if bad.Validate() == nil {
		t.Error("In without values accepted")
	}
	bad = &kd.LabelSelector{MatchExpressions: []kd.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
	if bad.Validate() == nil {
		t.Error("unknown operator accepted")
	}
}

func TestDurationAndDebugList(t *testing.T) {
	for secs, want := range map[int64]string{0: "0s", 45: "45s", 60: "1m", 725: "12m 5s", 3600: "1h",
		12000: "3h 20m", 86400: "1d", 604800: "7d", 788400: "9d 3h", -90: "-1m 30s"} {
		if got := kd.Duration(secs); got != want {
			t.Errorf("%d: %q, want %q", secs, got, want)
		}
	}
	if got := kd.DebugList([]string{"Running", `a"b`}); got != `["Running", "a\"b"]` {
		t.Error(got)
	}
}

func TestNamespaces(t *testing.T) {
	var none *kd.Namespaces
	if !none.Allows("x") || none.Validate() != nil {
		t.Error("nil namespaces")
	}
	inc := &kd.Namespaces{Include: []string{"a"}}
	exc := &kd.Namespaces{Exclude: []string{"a"}}
	if !inc.Allows("a") || inc.Allows("b") || exc.Allows("a") || !exc.Allows("b") {
		t.Error("include/exclude")
	}
}
