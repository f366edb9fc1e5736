//go:build wasip1

package kd

import "unsafe"

//go:wasmimport kube_descheduler node_count
func hostNodeCount() int32

//go:wasmimport kube_descheduler pod_count
func hostPodCount() int32

//go:wasmimport kube_descheduler namespace_count
func hostNamespaceCount() int32

//go:wasmimport kube_descheduler pod_column
func hostPodColumn(column int32, dst unsafe.Pointer, count int32) int32

//go:wasmimport kube_descheduler namespace_name
func hostNamespaceName(ns int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler node_name
func hostNodeName(node int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler pod_name
func hostPodName(pod int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler pod_label
func hostPodLabel(pod int32, key unsafe.Pointer, keyLen int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler pod_owner_kind
func hostPodOwnerKind(pod int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler pod_has_state
func hostPodHasState(pod int32, flags int32, state unsafe.Pointer, stateLen int32) int32

//go:wasmimport kube_descheduler nominate
func hostNominate(pod int32, code unsafe.Pointer, codeLen int32, text unsafe.Pointer, textLen int32) int32

//go:wasmimport kube_descheduler reason_number
func hostReasonNumber(key unsafe.Pointer, keyLen int32, value int64) int32

//go:wasmimport kube_descheduler reason_flag
func hostReasonFlag(key unsafe.Pointer, keyLen int32, value int32) int32

//go:wasmimport kube_descheduler node_taints
func hostNodeTaints(node int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler pod_tolerations
func hostPodTolerations(pod int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler pod_conditions
func hostPodConditions(pod int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler pod_containers
func hostPodContainers(pod int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler pod_owners
func hostPodOwners(pod int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler reason_string
func hostReasonString(key unsafe.Pointer, keyLen int32, value unsafe.Pointer, valueLen int32) int32

//go:wasmimport kube_descheduler node_pod_count
func hostNodePodCount(node int32) int32

//go:wasmimport kube_descheduler node_pod_offset
func hostNodePodOffset(node int32) int32

//go:wasmimport kube_descheduler node_pod_column
func hostNodePodColumn(node int32, column int32, dst unsafe.Pointer, count int32) int32

//go:wasmimport kube_descheduler pod_namespace
func hostPodNamespace(pod int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler fail
func hostFail(msg unsafe.Pointer, msgLen int32)

//go:wasmimport kube_descheduler explain
func hostExplain(text unsafe.Pointer, textLen int32) int32

// wasmHost is the real host.
type wasmHost struct{ buf []byte }

// strPtr is a pointer to s's bytes (nil for an empty string: the host reads no byte).
func strPtr(s string) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.StringData(s))
}

// bytes calls f with the host's buffer until the whole answer fits; n < 0 means absent. The
// bytes are valid until the next call.
func (h *wasmHost) bytes(f func(buf unsafe.Pointer, cap int32) int32) ([]byte, bool) {
	if h.buf == nil {
		h.buf = make([]byte, 256)
	}
	for {
		n := f(unsafe.Pointer(&h.buf[0]), int32(len(h.buf)))
		if n < 0 {
			return nil, false
		}
		if int(n) <= len(h.buf) {
			return h.buf[:n], true
		}
		h.buf = make([]byte, n)
	}
}

// str is bytes as a string.
func (h *wasmHost) str(f func(buf unsafe.Pointer, cap int32) int32) (string, bool) {
	b, ok := h.bytes(f)
	return string(b), ok
}

// facts decodes the JSON array a v1.1 function gives (read by set, see decodeFacts); a host
// answer that does not decode panics (the SDK turns it into the run's failure).
func facts[T any](h *wasmHost, what string, set func(*T, []byte, *flatScanner), f func(buf unsafe.Pointer, cap int32) int32) []T {
	b, _ := h.bytes(f)
	out, err := decodeFacts(b, set)
	if err != nil {
		panic("kd: " + what + ": " + err.Error())
	}
	return out
}

func (h *wasmHost) NodeTaints(node int) []Taint {
	return facts(h, "node_taints", setTaint, func(b unsafe.Pointer, c int32) int32 { return hostNodeTaints(int32(node), b, c) })
}

func (h *wasmHost) PodTolerations(pod int) []Toleration {
	return facts(h, "pod_tolerations", setToleration, func(b unsafe.Pointer, c int32) int32 { return hostPodTolerations(int32(pod), b, c) })
}

func (h *wasmHost) PodConditions(pod int) []Condition {
	return facts(h, "pod_conditions", setCondition, func(b unsafe.Pointer, c int32) int32 { return hostPodConditions(int32(pod), b, c) })
}

func (h *wasmHost) PodContainers(pod int) []Container {
	return facts(h, "pod_containers", setContainer, func(b unsafe.Pointer, c int32) int32 { return hostPodContainers(int32(pod), b, c) })
}

func (h *wasmHost) PodOwners(pod int) []Owner {
	return facts(h, "pod_owners", setOwner, func(b unsafe.Pointer, c int32) int32 { return hostPodOwners(int32(pod), b, c) })
}

func (h *wasmHost) NodeCount() int      { return int(hostNodeCount()) }
func (h *wasmHost) PodCount() int       { return int(hostPodCount()) }
func (h *wasmHost) NamespaceCount() int { return int(hostNamespaceCount()) }

func (h *wasmHost) PodColumn(col Column, count int) []int64 {
	out := make([]int64, count)
	if count > 0 {
		// The host writes little-endian i64s, which is how wasm stores an int64.
		hostPodColumn(int32(col), unsafe.Pointer(&out[0]), int32(count))
	}
	return out
}

func (h *wasmHost) NodePodCount(node int) int  { return int(hostNodePodCount(int32(node))) }
func (h *wasmHost) NodePodOffset(node int) int { return int(hostNodePodOffset(int32(node))) }

func (h *wasmHost) NodePodColumn(node int, col Column, count int) []int64 {
	out := make([]int64, count)
	if count > 0 {
		hostNodePodColumn(int32(node), int32(col), unsafe.Pointer(&out[0]), int32(count))
	}
	return out
}

func (h *wasmHost) PodNamespace(pod int) string {
	s, _ := h.str(func(b unsafe.Pointer, c int32) int32 { return hostPodNamespace(int32(pod), b, c) })
	return s
}

func (h *wasmHost) NamespaceName(ns int) string {
	s, _ := h.str(func(b unsafe.Pointer, c int32) int32 { return hostNamespaceName(int32(ns), b, c) })
	return s
}

func (h *wasmHost) NodeName(node int) string {
	s, _ := h.str(func(b unsafe.Pointer, c int32) int32 { return hostNodeName(int32(node), b, c) })
	return s
}

func (h *wasmHost) PodName(pod int) string {
	s, _ := h.str(func(b unsafe.Pointer, c int32) int32 { return hostPodName(int32(pod), b, c) })
	return s
}

func (h *wasmHost) PodLabel(pod int, key string) (string, bool) {
	return h.str(func(b unsafe.Pointer, c int32) int32 {
		return hostPodLabel(int32(pod), strPtr(key), int32(len(key)), b, c)
	})
}

func (h *wasmHost) PodOwnerKind(pod int) (string, bool) {
	return h.str(func(b unsafe.Pointer, c int32) int32 { return hostPodOwnerKind(int32(pod), b, c) })
}

func (h *wasmHost) PodHasState(pod int, flags StateFlags, state string) bool {
	return hostPodHasState(int32(pod), int32(flags), strPtr(state), int32(len(state))) == 1
}

func (h *wasmHost) Nominate(pod int, r Reason) {
	hostNominate(int32(pod), strPtr(r.Code), int32(len(r.Code)), strPtr(r.Text), int32(len(r.Text)))
	for _, n := range r.Numbers {
		hostReasonNumber(strPtr(n.Key), int32(len(n.Key)), n.Value)
	}
	for _, f := range r.Flags {
		v := int32(0)
		if f.Value {
			v = 1
		}
		hostReasonFlag(strPtr(f.Key), int32(len(f.Key)), v)
	}
	for _, s := range r.Strings {
		hostReasonString(strPtr(s.Key), int32(len(s.Key)), strPtr(s.Value), int32(len(s.Value)))
	}
}

func (h *wasmHost) Explain(text string) { hostExplain(strPtr(text), int32(len(text))) }

func (h *wasmHost) Fail(msg string) { hostFail(strPtr(msg), int32(len(msg))) }

// argsBuf keeps the bytes kd_alloc hands out alive until the call ends (a fresh instance per
// call: nothing is freed).
var argsBuf [][]byte

//go:wasmexport kd_abi_version
func kdABIVersion() int32 { return ABIVersion }

//go:wasmexport kd_alloc
func kdAlloc(size int32) int32 {
	if size < 0 {
		return 0
	}
	b := make([]byte, size+1)
	argsBuf = append(argsBuf, b)
	return int32(uintptr(unsafe.Pointer(&b[0])))
}

// guestBytes is the n bytes the host wrote at ptr: a buffer kd_alloc handed out.
func guestBytes(ptr, n int32) []byte {
	if n <= 0 {
		return nil
	}
	for _, b := range argsBuf {
		if int32(uintptr(unsafe.Pointer(&b[0]))) == ptr && int(n) < len(b) {
			return b[:n]
		}
	}
	panic("kd: the host passed args at a pointer kd_alloc did not return")
}

//go:wasmexport kd_validate
func kdValidate(ptr, n int32) int32 { return RunValidate(&wasmHost{}, guestBytes(ptr, n)) }

//go:wasmexport deschedule
func kdDeschedule(ptr, n int32, now int64) int32 {
	return RunDeschedule(&wasmHost{}, guestBytes(ptr, n), now)
}

//go:wasmexport balance
func kdBalance(ptr, n int32, now int64) int32 {
	return RunBalance(&wasmHost{}, guestBytes(ptr, n), now)
}

//go:wasmexport kd_explain
func kdExplain(ptr, n int32, now int64, pod int32) int32 {
	return RunExplain(&wasmHost{}, guestBytes(ptr, n), now, int(pod))
}
