// PodLifeTime as a Go WebAssembly plugin (Deschedule): evicts pods older than
// maxPodLifeTimeSeconds, in one of `states`, with one of `conditions` and/or a container exit
// code of `exitCodes`, in the namespaces and with the labels and owner kinds the args select;
// oldest first across all nodes, with the native plugin's reason (code PodLifeTimeExceeded, its
// text and numbers) and its `plan --explain` sentences.
//
// Args: the native plugin's (upstream v0.36 PodLifeTimeArgs). Owners, conditions and container
// exit codes come from ABI v1.1 (pod_owners, pod_conditions, pod_containers), asked only for the
// pods the other args already selected.
package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"kube-descheduler/sdk/go/kd"
)

// Args are upstream's PodLifeTimeArgs.
type Args struct {
	Namespaces                   *kd.Namespaces    `json:"namespaces"`
	LabelSelector                *kd.LabelSelector `json:"labelSelector"`
	OwnerKinds                   *OwnerKinds       `json:"ownerKinds"`
	MaxPodLifeTimeSeconds        *uint64           `json:"maxPodLifeTimeSeconds"`
	States                       []string          `json:"states"`
	Conditions                   []ConditionFilter `json:"conditions"`
	ExitCodes                    []int32           `json:"exitCodes"`
	IncludingInitContainers      bool              `json:"includingInitContainers"`
	IncludingEphemeralContainers bool              `json:"includingEphemeralContainers"`
}

// OwnerKinds selects pods by their owner's kind: include or exclude, not both.
type OwnerKinds struct {
	Include []string `json:"include"`
	Exclude []string `json:"exclude"`
}

// ConditionFilter matches a pod condition by type, status and reason ("" matches any), and by
// the time since its last transition when MinTimeSinceLastTransitionSeconds is set.
type ConditionFilter struct {
	Type                              string  `json:"type"`
	Status                            string  `json:"status"`
	Reason                            string  `json:"reason"`
	MinTimeSinceLastTransitionSeconds *uint64 `json:"minTimeSinceLastTransitionSeconds"`
}

// AllowedStates are the states upstream accepts.
var AllowedStates = []string{
	"Completed", "ContainerCannotRun", "ContainerCreating", "CrashLoopBackOff",
	"CreateContainerConfigError", "CreateContainerError", "DeadlineExceeded", "ErrImagePull",
	"Error", "Evicted", "Failed", "ImagePullBackOff", "InvalidImageName", "NodeAffinity",
	"NodeLost", "OOMKilled", "Pending", "PodInitializing", "Running", "Shutdown", "StartError",
	"Succeeded", "UnexpectedAdmissionError", "Unknown",
}

// PodLifeTime is the plugin.
type PodLifeTime struct{}

func init() { kd.Register[Args](PodLifeTime{}) }

func main() {}

// Validate applies upstream's rules.
func (PodLifeTime) Validate(a *Args) error {
	if err := a.Namespaces.Validate(); err != nil {
		return err
	}
	if err := a.LabelSelector.Validate(); err != nil {
		return err
	}
	if a.OwnerKinds != nil && len(a.OwnerKinds.Include) > 0 && len(a.OwnerKinds.Exclude) > 0 {
		return errors.New("args.ownerKinds: only one of Include/Exclude ownerKinds can be set")
	}
	for _, s := range a.States {
		if !slices.Contains(AllowedStates, s) {
			return fmt.Errorf("args.states: %q: states must be one of %s", s, kd.DebugList(AllowedStates))
		}
	}
	for i, f := range a.Conditions {
		if f.Type == "" && f.Status == "" && f.Reason == "" && f.MinTimeSinceLastTransitionSeconds == nil {
			return fmt.Errorf("args.conditions[%d]: at least one of type, status, reason, or minTimeSinceLastTransitionSeconds must be set", i)
		}
	}
	if a.MaxPodLifeTimeSeconds == nil && len(a.States) == 0 && len(a.Conditions) == 0 && len(a.ExitCodes) == 0 {
		return errors.New("args: at least one filtering criterion must be specified (maxPodLifeTimeSeconds, states, conditions, or exitCodes)")
	}
	return nil
}

// oldEnough is whether a pod created at created (Unix seconds, kd.UnknownTime: very old) passes
// maxPodLifeTimeSeconds: strictly older than the max, in whole seconds.
func oldEnough(c *kd.Call, a *Args, created int64) bool {
	if a.MaxPodLifeTimeSeconds == nil || created == kd.UnknownTime {
		return true
	}
	age := c.NowUnix() - created
	return age >= 0 && uint64(age) > *a.MaxPodLifeTimeSeconds
}

// qualifies is the native plugin's test of one pod, without the DefaultEvictor (the host's).
func qualifies(c *kd.Call, a *Args, p kd.Pod, nsOK []bool) bool {
	if !nsOK[p.NamespaceIndex()] || !a.LabelSelector.MatchesPod(p) {
		return false
	}
	if created, _ := p.CreatedUnix(); !oldEnough(c, a, created) {
		return false
	}
	if len(a.States) > 0 {
		flags := kd.StatePhase | kd.StatePodReason | kd.StateWaiting | kd.StateTerminated
		if a.IncludingInitContainers {
			flags |= kd.StateInitContainers
		}
		if a.IncludingEphemeralContainers {
			flags |= kd.StateEphemeralContainers
		}
		if !slices.ContainsFunc(a.States, func(s string) bool { return p.HasState(flags, s) }) {
			return false
		}
	}
	if o := a.OwnerKinds; o != nil && (len(o.Include) > 0 || len(o.Exclude) > 0) {
		owners := p.Owners()
		kindIn := func(kinds []string) bool {
			return slices.ContainsFunc(owners, func(x kd.Owner) bool { return slices.Contains(kinds, x.Kind) })
		}
		if len(o.Include) > 0 && !kindIn(o.Include) {
			return false
		}
		if len(o.Include) == 0 && kindIn(o.Exclude) {
			return false
		}
	}
	if len(a.Conditions) > 0 && !matchesConditions(c, a, p) {
		return false
	}
	if len(a.ExitCodes) > 0 && !hasExitCode(a, p) {
		return false
	}
	return true
}

// matchesConditions is whether some condition of the pod matches some filter of the args.
func matchesConditions(c *kd.Call, a *Args, p kd.Pod) bool {
	conds := p.Conditions()
	for _, f := range a.Conditions {
		for _, k := range conds {
			if (f.Type != "" && k.Type != f.Type) || (f.Status != "" && k.Status != f.Status) ||
				(f.Reason != "" && k.Reason != f.Reason) {
				continue
			}
			if m := f.MinTimeSinceLastTransitionSeconds; m != nil {
				if k.LastTransitionUnix == nil {
					continue
				}
				idle := c.NowUnix() - *k.LastTransitionUnix
				if idle < 0 || uint64(idle) < *m {
					continue
				}
			}
			return true
		}
	}
	return false
}

// hasExitCode is whether a terminated app container (or init container, with
// includingInitContainers) exited with one of exitCodes.
func hasExitCode(a *Args, p kd.Pod) bool {
	for _, k := range p.Containers() {
		if k.ExitCode == nil || k.Kind == kd.EphemeralContainer ||
			(k.Kind == kd.InitContainer && !a.IncludingInitContainers) {
			continue
		}
		if slices.Contains(a.ExitCodes, *k.ExitCode) {
			return true
		}
	}
	return false
}

// pick is a qualifying pod and its creation time.
type pick struct {
	created int64
	pod     int32
}

// oldestFirst sorts picked by creation time (an unknown one first), in table order for equal
// times. When the times span less than 2^32 seconds, each pick is one uint64 key (time, then
// index) and the keys are sorted as numbers, which is several times faster inside WebAssembly
// than a comparison function.
func oldestFirst(picked []pick) {
	if len(picked) == 0 {
		return
	}
	lo, hi := picked[0].created, picked[0].created
	for _, k := range picked {
		lo, hi = min(lo, k.created), max(hi, k.created)
	}
	if span := uint64(hi) - uint64(lo); hi-lo < 0 || span >= 1<<32 {
		slices.SortFunc(picked, func(x, y pick) int {
			if x.created != y.created {
				return cmp.Compare(x.created, y.created)
			}
			return cmp.Compare(x.pod, y.pod)
		})
		return
	}
	keys := make([]uint64, len(picked))
	for i, k := range picked {
		keys[i] = uint64(k.created-lo)<<32 | uint64(uint32(k.pod))
	}
	slices.Sort(keys)
	for i, key := range keys {
		picked[i] = pick{created: lo + int64(key>>32), pod: int32(uint32(key))}
	}
}

// Deschedule nominates the qualifying pods, oldest first.
func (PodLifeTime) Deschedule(c *kd.Call, a *Args) error {
	nsOK := a.Namespaces.Mask(c)
	nodes, created, ns := c.Column(kd.ColNode), c.Column(kd.ColCreated), c.Column(kd.ColNamespace)
	var picked []pick
	for i, n := range nodes {
		// The columns first: most pods are decided without a host call.
		if n < 0 || !nsOK[ns[i]] || !oldEnough(c, a, created[i]) {
			continue
		}
		if qualifies(c, a, c.Pod(i), nsOK) {
			picked = append(picked, pick{created[i], int32(i)})
		}
	}
	oldestFirst(picked)
	var maxText []byte
	if m := a.MaxPodLifeTimeSeconds; m != nil {
		maxText = append(maxText, " > maxPodLifeTimeSeconds "...)
		maxText = strconv.AppendUint(maxText, *m, 10)
		maxText = append(maxText, " ("...)
		maxText = append(kd.AppendDuration(maxText, int64(*m)), ')')
	}
	if len(a.States) > 0 {
		maxText = append(maxText, "; in one of the states "...)
		maxText = append(maxText, kd.DebugList(a.States)...)
	}
	var text []byte
	var numbers [2]kd.Number
	for _, k := range picked {
		p := c.Pod(int(k.pod))
		r := kd.Reason{Code: "PodLifeTimeExceeded", Numbers: numbers[:0]}
		text = append(text[:0], "age "...)
		if created, ok := p.CreatedUnix(); ok {
			age := c.NowUnix() - created
			text = kd.AppendDuration(text, age)
			r.Numbers = append(r.Numbers, kd.Number{Key: "ageSeconds", Value: age})
		} else {
			text = append(text, "unknown"...)
		}
		if m := a.MaxPodLifeTimeSeconds; m != nil {
			r.Numbers = append(r.Numbers, kd.Number{Key: "maxPodLifeTimeSeconds", Value: int64(*m)})
		}
		r.Text = string(append(text, maxText...))
		if err := c.Nominate(p, r); err != nil {
			return err
		}
	}
	return nil
}

// Explain is the native plugin's sentence for a pod it does not select.
func (PodLifeTime) Explain(c *kd.Call, a *Args, p kd.Pod) (string, error) {
	if created, ok := p.CreatedUnix(); ok && a.MaxPodLifeTimeSeconds != nil {
		age, m := c.NowUnix()-created, *a.MaxPodLifeTimeSeconds
		if age <= int64(m) {
			return fmt.Sprintf("age %s <= maxPodLifeTimeSeconds %d (%s)", kd.Duration(age), m, kd.Duration(int64(m))), nil
		}
	}
	return "its namespace, labels, states, conditions or owner kind do not match the plugin's args", nil
}
