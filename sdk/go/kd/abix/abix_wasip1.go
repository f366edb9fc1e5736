//go:build wasip1

package abix

import "unsafe"

//go:wasmimport kube_descheduler node_taints
func hostNodeTaints(node int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler pod_tolerations
func hostPodTolerations(pod int32, buf unsafe.Pointer, cap int32) int32

//go:wasmimport kube_descheduler reason_string
func hostReasonString(key unsafe.Pointer, keyLen int32, value unsafe.Pointer, valueLen int32) int32

type wasmHost struct{}

var wasm Host = wasmHost{}

func read(f func(buf unsafe.Pointer, cap int32) int32) string {
	buf := make([]byte, 512)
	for {
		n := f(unsafe.Pointer(&buf[0]), int32(len(buf)))
		if n < 0 {
			return "[]"
		}
		if int(n) <= len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, n)
	}
}

func ptr(s string) unsafe.Pointer {
	if s == "" {
		return nil
	}
	return unsafe.Pointer(unsafe.StringData(s))
}

func (wasmHost) NodeTaintsJSON(node int) string {
	return read(func(b unsafe.Pointer, c int32) int32 { return hostNodeTaints(int32(node), b, c) })
}

func (wasmHost) PodTolerationsJSON(pod int) string {
	return read(func(b unsafe.Pointer, c int32) int32 { return hostPodTolerations(int32(pod), b, c) })
}

func (wasmHost) ReasonString(key, value string) {
	hostReasonString(ptr(key), int32(len(key)), ptr(value), int32(len(value)))
}
