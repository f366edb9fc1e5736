package unwasi

import (
	"bytes"
	"testing"
)

// A hand-made module: imports wasi fd_write and kube_descheduler.pod_count, defines _initialize
// (calls fd_write) and f (calls pod_count), exports both and memory.
func module() []byte {
	var m []byte
	m = append(m, 0, 'a', 's', 'm', 1, 0, 0, 0)
	sec := func(id byte, body []byte) {
		m = append(m, id)
		m = appendU32(m, uint32(len(body)))
		m = append(m, body...)
	}
	sec(1, []byte{3, 0x60, 4, 0x7f, 0x7f, 0x7f, 0x7f, 1, 0x7f, 0x60, 0, 1, 0x7f, 0x60, 0, 0})
	var imp []byte
	imp = append(imp, 2)
	imp = appendName(imp, "wasi_snapshot_preview1")
	imp = appendName(imp, "fd_write")
	imp = append(imp, 0, 0)
	imp = appendName(imp, "kube_descheduler")
	imp = appendName(imp, "pod_count")
	imp = append(imp, 0, 1)
	sec(2, imp)
	sec(3, []byte{2, 2, 1})
	sec(5, []byte{1, 0, 1})
	var exp []byte
	exp = append(exp, 3)
	exp = appendName(exp, "_initialize")
	exp = append(exp, 0, 2)
	exp = appendName(exp, "f")
	exp = append(exp, 0, 3)
	exp = appendName(exp, "memory")
	exp = append(exp, 2, 0)
	sec(7, exp)
	init := []byte{0, 0x41, 1, 0x41, 0, 0x41, 0, 0x41, 0, 0x10, 0, 0x1a, 0x0b}
	f := []byte{0, 0x10, 1, 0x0b}
	code := []byte{2}
	code = appendU32(code, uint32(len(init)))
	code = append(code, init...)
	code = appendU32(code, uint32(len(f)))
	code = append(code, f...)
	sec(10, code)
	var names []byte
	names = appendU32(names, 2)
	names = appendU32(names, 2)
	names = appendName(names, "init")
	names = appendU32(names, 3)
	names = appendName(names, "ffff")
	name := appendName(nil, "name")
	name = append(name, 1)
	name = appendU32(name, uint32(len(names)))
	name = append(name, names...)
	sec(0, name)
	return m
}

func TestRewrite(t *testing.T) {
	out, err := Rewrite(module())
	if err != nil {
		t.Fatal(err)
	}
	imps, err := Imports(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(imps) != 1 || imps[0] != "kube_descheduler.pod_count" {
		t.Fatalf("imports %v", imps)
	}
	// _initialize (old 2, now 1) is the start function and no longer exported; f (old 3) is
	// now 2 and still calls pod_count (old 1, now 0); _initialize calls the stub (now 3).
	if !bytes.Contains(out, []byte{8, 1, 1}) {
		t.Error("no start section for function 1")
	}
	if bytes.Contains(out, []byte("_initialize")) {
		t.Error("_initialize still exported")
	}
	if !bytes.Contains(out, []byte{0x10, 3, 0x1a, 0x0b}) || !bytes.Contains(out, []byte{0, 0x10, 0, 0x0b}) {
		t.Error("calls not renumbered")
	}
	// The function names follow their functions: init is 1, ffff is 2.
	if !bytes.Contains(out, []byte{1, 4, 'i', 'n', 'i', 't', 2, 4, 'f', 'f', 'f', 'f'}) {
		t.Error("function names not renumbered")
	}
	again, err := Rewrite(out)
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("a rewritten module is not left as is: %v", err)
	}
	if _, err := Rewrite([]byte("nope")); err == nil {
		t.Error("accepted a non-module")
	}
}
