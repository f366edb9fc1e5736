// Package unwasi rewrites a Go wasip1 reactor (GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared) into a module kube-descheduler's sandbox accepts: the sandbox offers no
// WASI, so every wasi_snapshot_preview1 function import is replaced by a function defined in the
// module itself (no filesystem, no environment, no output, a deterministic clock and randomness),
// and the reactor's _initialize export becomes the module's start function, so that the Go
// runtime is set up when the host instantiates the module (the host calls no _initialize).
package unwasi

import (
	"bytes"
	"errors"
	"fmt"
)

// WASIModule is the import module Go's wasip1 port uses.
const WASIModule = "wasi_snapshot_preview1"

// Errno values the replacements return.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoNosys   = 52
)

type section struct {
	id   byte
	body []byte
}

type funcType struct {
	params, results []byte
}

// wasiFn is a removed WASI import: its name and type index.
type wasiFn struct {
	name string
	typ  uint32
}

// parsed is what Rewrite reads from a module before writing it again.
type parsed struct {
	head  []byte
	secs  []section
	types []funcType
	// removed are the WASI function imports, in import order.
	removed []wasiFn
	// keptImports are the other imports' encodings.
	keptImports [][]byte
	// importIsWASI says, for each imported function, whether it is removed.
	importIsWASI []bool
	// funcTypes are the type indices of the defined functions.
	funcTypes []uint32
	// initOld is _initialize's function index, -1 when not exported.
	initOld int
	// remap maps an old function index to its new one.
	remap []uint32
}

// find is the index of the first section with id, -1 when there is none.
func (m *parsed) find(id byte) int {
	for i, s := range m.secs {
		if s.id == id {
			return i
		}
	}
	return -1
}

// Rewrite returns the module without WASI imports and with _initialize as its start function.
// A module that imports no WASI function and exports no _initialize is returned unchanged.
func Rewrite(mod []byte) ([]byte, error) {
	m, err := parse(mod)
	if err != nil {
		return nil, err
	}
	if len(m.removed) == 0 && m.initOld < 0 {
		return mod, nil
	}
	if m.find(8) >= 0 && m.initOld >= 0 {
		return nil, errors.New("the module already has a start function")
	}
	m.buildRemap()
	return m.write()
}

// parse reads the sections Rewrite changes.
func parse(mod []byte) (*parsed, error) {
	if len(mod) < 8 || !bytes.Equal(mod[:8], []byte{0, 'a', 's', 'm', 1, 0, 0, 0}) {
		return nil, errors.New("not a WebAssembly module (version 1)")
	}
	m := &parsed{head: mod[:8], initOld: -1}
	r := &reader{b: mod, off: 8}
	for !r.eof() {
		id := r.byte()
		n := int(r.u32())
		m.secs = append(m.secs, section{id, r.bytes(n)})
	}
	if r.err != nil {
		return nil, r.err
	}
	for _, step := range []func() error{m.readTypes, m.readImports, m.readFuncs, m.readInit} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *parsed) readTypes() error {
	i := m.find(1)
	if i < 0 {
		return nil
	}
	tr := &reader{b: m.secs[i].body}
	for n := tr.u32(); n > 0; n-- {
		if tr.byte() != 0x60 {
			return errors.New("type section: not a function type")
		}
		p := tr.bytes(int(tr.u32()))
		res := tr.bytes(int(tr.u32()))
		m.types = append(m.types, funcType{p, res})
	}
	if tr.err != nil {
		return fmt.Errorf("type section: %w", tr.err)
	}
	return nil
}

// readImports keeps all imports but the WASI functions, and remembers those.
func (m *parsed) readImports() error {
	i := m.find(2)
	if i < 0 {
		return nil
	}
	ir := &reader{b: m.secs[i].body}
	for n := ir.u32(); n > 0; n-- {
		start := ir.off
		mod := ir.name()
		field := ir.name()
		kind := ir.byte()
		if kind == 0 {
			t := ir.u32()
			isWASI := mod == WASIModule
			m.importIsWASI = append(m.importIsWASI, isWASI)
			if isWASI {
				if int(t) >= len(m.types) {
					return fmt.Errorf("import %s.%s: bad type index", mod, field)
				}
				m.removed = append(m.removed, wasiFn{field, t})
				continue
			}
		} else if !skipNonFunctionDesc(ir, kind) {
			return fmt.Errorf("import %s.%s: unknown kind %d", mod, field, kind)
		}
		if ir.err != nil {
			return fmt.Errorf("import section: %w", ir.err)
		}
		if mod == WASIModule {
			return fmt.Errorf("import %s.%s is not a function", mod, field)
		}
		m.keptImports = append(m.keptImports, ir.b[start:ir.off])
	}
	if ir.err != nil {
		return fmt.Errorf("import section: %w", ir.err)
	}
	return nil
}

// readFuncs reads the defined functions' types.
func (m *parsed) readFuncs() error {
	i := m.find(3)
	if i < 0 {
		return nil
	}
	fr := &reader{b: m.secs[i].body}
	for n := fr.u32(); n > 0; n-- {
		m.funcTypes = append(m.funcTypes, fr.u32())
	}
	if fr.err != nil {
		return fmt.Errorf("function section: %w", fr.err)
	}
	return nil
}

// readInit finds the _initialize export.
func (m *parsed) readInit() error {
	i := m.find(7)
	if i < 0 {
		return nil
	}
	er := &reader{b: m.secs[i].body}
	for n := er.u32(); n > 0; n-- {
		name := er.name()
		kind := er.byte()
		idx := er.u32()
		if kind == 0 && name == "_initialize" {
			m.initOld = int(idx)
		}
	}
	if er.err != nil {
		return fmt.Errorf("export section: %w", er.err)
	}
	return nil
}

// buildRemap numbers the functions: kept imports, then the old defined functions, then the
// replacements.
func (m *parsed) buildRemap() {
	oldImportFuncs := len(m.importIsWASI)
	newImportFuncs := oldImportFuncs - len(m.removed)
	m.remap = make([]uint32, oldImportFuncs+len(m.funcTypes))
	imp, rep := 0, 0
	for i, isWASI := range m.importIsWASI {
		if isWASI {
			m.remap[i] = uint32(newImportFuncs + len(m.funcTypes) + rep)
			rep++
		} else {
			m.remap[i] = uint32(imp)
			imp++
		}
	}
	for j := range m.funcTypes {
		m.remap[oldImportFuncs+j] = uint32(newImportFuncs + j)
	}
}

// fix is the new index of old function index idx.
func (m *parsed) fix(idx uint32) (uint32, error) {
	if int(idx) >= len(m.remap) {
		return 0, fmt.Errorf("function index %d out of range", idx)
	}
	return m.remap[idx], nil
}
