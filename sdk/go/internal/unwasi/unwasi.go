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
	"sort"
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

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("offset %d: %s", r.off, fmt.Sprintf(format, a...))
	}
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || r.off+n > len(r.b) {
		r.fail("unexpected end")
		r.off = len(r.b)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u32() uint32 {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return uint32(v)
		}
	}
	r.fail("bad LEB128")
	return 0
}

// sleb skips a signed LEB128 of at most maxBytes bytes.
func (r *reader) sleb(maxBytes int) {
	for i := 0; i < maxBytes; i++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.fail("bad signed LEB128")
}

func (r *reader) name() string { return string(r.bytes(int(r.u32()))) }

func (r *reader) eof() bool { return r.off >= len(r.b) }

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
		} else {
			return append(b, c)
		}
	}
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

// Rewrite returns the module without WASI imports and with _initialize as its start function.
// A module that imports no WASI function and exports no _initialize is returned unchanged.
func Rewrite(mod []byte) ([]byte, error) {
	if len(mod) < 8 || !bytes.Equal(mod[:8], []byte{0, 'a', 's', 'm', 1, 0, 0, 0}) {
		return nil, errors.New("not a WebAssembly module (version 1)")
	}
	r := &reader{b: mod, off: 8}
	var secs []section
	for !r.eof() {
		id := r.byte()
		n := int(r.u32())
		secs = append(secs, section{id, r.bytes(n)})
	}
	if r.err != nil {
		return nil, r.err
	}
	find := func(id byte) int {
		for i, s := range secs {
			if s.id == id {
				return i
			}
		}
		return -1
	}

	// Types.
	var types []funcType
	if i := find(1); i >= 0 {
		tr := &reader{b: secs[i].body}
		for n := tr.u32(); n > 0; n-- {
			if tr.byte() != 0x60 {
				return nil, errors.New("type section: not a function type")
			}
			p := tr.bytes(int(tr.u32()))
			res := tr.bytes(int(tr.u32()))
			types = append(types, funcType{p, res})
		}
		if tr.err != nil {
			return nil, fmt.Errorf("type section: %w", tr.err)
		}
	}

	// Imports: keep all but the WASI functions; remember those.
	type wasiFn struct {
		name string
		typ  uint32
	}
	var removed []wasiFn
	oldImportFuncs := 0
	var keptImports [][]byte
	// oldToNew for imported functions is filled after we know the counts.
	var importIsWASI []bool
	importSec := find(2)
	if importSec >= 0 {
		ir := &reader{b: secs[importSec].body}
		for n := ir.u32(); n > 0; n-- {
			start := ir.off
			mod := ir.name()
			field := ir.name()
			kind := ir.byte()
			switch kind {
			case 0:
				t := ir.u32()
				isWASI := mod == WASIModule
				importIsWASI = append(importIsWASI, isWASI)
				oldImportFuncs++
				if isWASI {
					if int(t) >= len(types) {
						return nil, fmt.Errorf("import %s.%s: bad type index", mod, field)
					}
					removed = append(removed, wasiFn{field, t})
					continue
				}
			case 1:
				ir.byte()
				lim(ir)
			case 2:
				lim(ir)
			case 3:
				ir.byte()
				ir.byte()
			default:
				return nil, fmt.Errorf("import %s.%s: unknown kind %d", mod, field, kind)
			}
			if ir.err != nil {
				return nil, fmt.Errorf("import section: %w", ir.err)
			}
			if mod == WASIModule {
				return nil, fmt.Errorf("import %s.%s is not a function", mod, field)
			}
			keptImports = append(keptImports, ir.b[start:ir.off])
		}
		if ir.err != nil {
			return nil, fmt.Errorf("import section: %w", ir.err)
		}
	}

	// Defined functions.
	var funcTypes []uint32
	if i := find(3); i >= 0 {
		fr := &reader{b: secs[i].body}
		for n := fr.u32(); n > 0; n-- {
			funcTypes = append(funcTypes, fr.u32())
		}
		if fr.err != nil {
			return nil, fmt.Errorf("function section: %w", fr.err)
		}
	}

	// Exports: find _initialize.
	initOld := -1
	if i := find(7); i >= 0 {
		er := &reader{b: secs[i].body}
		for n := er.u32(); n > 0; n-- {
			name := er.name()
			kind := er.byte()
			idx := er.u32()
			if kind == 0 && name == "_initialize" {
				initOld = int(idx)
			}
		}
		if er.err != nil {
			return nil, fmt.Errorf("export section: %w", er.err)
		}
	}
	if len(removed) == 0 && initOld < 0 {
		return mod, nil
	}
	if find(8) >= 0 && initOld >= 0 {
		return nil, errors.New("the module already has a start function")
	}

	// Index maps: kept imports, then the old defined functions, then the replacements.
	k := len(removed)
	newImportFuncs := oldImportFuncs - k
	remap := make([]uint32, oldImportFuncs+len(funcTypes))
	imp, rep := 0, 0
	for i := 0; i < oldImportFuncs; i++ {
		if importIsWASI[i] {
			remap[i] = uint32(newImportFuncs + len(funcTypes) + rep)
			rep++
		} else {
			remap[i] = uint32(imp)
			imp++
		}
	}
	for j := range funcTypes {
		remap[oldImportFuncs+j] = uint32(newImportFuncs + j)
	}
	fix := func(idx uint32) (uint32, error) {
		if int(idx) >= len(remap) {
			return 0, fmt.Errorf("function index %d out of range", idx)
		}
		return remap[idx], nil
	}

	// The clock global is appended after the module's globals (Go imports none).
	globalCount := 0
	if i := find(6); i >= 0 {
		gr := &reader{b: secs[i].body}
		globalCount = int(gr.u32())
	}
	clockGlobal := uint32(globalCount)

	var out []byte
	out = append(out, mod[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	addedGlobal := false
	addedStart := false
	for _, s := range secs {
		// Sections appear in id order (custom sections anywhere); the start section (8) goes
		// before the element section (9), or else before whatever follows the exports.
		if initOld >= 0 && !addedStart && s.id > 7 && s.id != 0 && s.id != 12 {
			nb := appendU32(nil, remap[initOld])
			emit(8, nb)
			addedStart = true
		}
		switch s.id {
		case 0:
			sr := &reader{b: s.body}
			if sr.name() == "name" {
				if nb, err := rewriteNames(s.body[sr.off:], fix); err == nil {
					emit(0, append(appendName(nil, "name"), nb...))
				}
				continue
			}
			emit(0, s.body)
		case 2:
			b := appendU32(nil, uint32(len(keptImports)))
			for _, ki := range keptImports {
				b = append(b, ki...)
			}
			emit(2, b)
		case 3:
			b := appendU32(nil, uint32(len(funcTypes)+k))
			for _, t := range funcTypes {
				b = appendU32(b, t)
			}
			for _, w := range removed {
				b = appendU32(b, w.typ)
			}
			emit(3, b)
		case 6:
			gr := &reader{b: s.body}
			n := gr.u32()
			b := appendU32(nil, n+1)
			b = append(b, s.body[gr.off:]...)
			b = append(b, 0x7e, 0x01, 0x42, 0x00, 0x0b) // mut i64 = 0
			emit(6, b)
			addedGlobal = true
		case 7:
			er := &reader{b: s.body}
			n := er.u32()
			var b []byte
			kept := 0
			for ; n > 0; n-- {
				name := er.name()
				kind := er.byte()
				idx := er.u32()
				if kind == 0 {
					if name == "_initialize" {
						continue // it is the start function now
					}
					var err error
					if idx, err = fix(idx); err != nil {
						return nil, fmt.Errorf("export %q: %w", name, err)
					}
				}
				b = appendName(b, name)
				b = append(b, kind)
				b = appendU32(b, idx)
				kept++
			}
			emit(7, append(appendU32(nil, uint32(kept)), b...))
		case 8:
			sr := &reader{b: s.body}
			idx, err := fix(sr.u32())
			if err != nil {
				return nil, fmt.Errorf("start section: %w", err)
			}
			emit(8, appendU32(nil, idx))
		case 9:
			b, err := rewriteElements(s.body, fix)
			if err != nil {
				return nil, fmt.Errorf("element section: %w", err)
			}
			emit(9, b)
		case 10:
			b, err := rewriteCode(s.body, fix, func(b []byte) []byte {
				for _, w := range removed {
					b = appendStub(b, w.name, types[w.typ], clockGlobal)
				}
				return b
			}, k)
			if err != nil {
				return nil, fmt.Errorf("code section: %w", err)
			}
			emit(10, b)
		default:
			emit(s.id, s.body)
		}
		if s.id == 2 && find(3) < 0 {
			return nil, errors.New("the module defines no functions")
		}
		if s.id == 5 && find(6) < 0 && !addedGlobal {
			// No global section: add one after memory.
			emit(6, []byte{1, 0x7e, 0x01, 0x42, 0x00, 0x0b})
			addedGlobal = true
		}
	}
	if initOld >= 0 && !addedStart {
		return nil, errors.New("no place for the start section")
	}
	if !addedGlobal {
		return nil, errors.New("no place for the clock global (no memory or global section)")
	}
	return out, nil
}

func lim(r *reader) {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

func rewriteElements(body []byte, fix func(uint32) (uint32, error)) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	b := appendU32(nil, n)
	for ; n > 0; n-- {
		start := r.off
		flags := r.u32()
		if flags != 0 {
			return nil, fmt.Errorf("segment kind %d is not supported", flags)
		}
		// offset expression up to end
		for {
			op := r.byte()
			if r.err != nil {
				return nil, r.err
			}
			if op == 0x0b {
				break
			}
			switch op {
			case 0x41:
				r.sleb(5)
			case 0x23:
				r.u32()
			default:
				return nil, fmt.Errorf("offset expression opcode 0x%02x", op)
			}
		}
		b = append(b, body[start:r.off]...)
		cnt := r.u32()
		b = appendU32(b, cnt)
		for ; cnt > 0; cnt-- {
			idx, err := fix(r.u32())
			if err != nil {
				return nil, err
			}
			b = appendU32(b, idx)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return b, nil
}

func rewriteCode(body []byte, fix func(uint32) (uint32, error), appendStubs func([]byte) []byte, k int) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	b := appendU32(nil, n+uint32(k))
	for i := uint32(0); i < n; i++ {
		size := int(r.u32())
		fb := r.bytes(size)
		if r.err != nil {
			return nil, r.err
		}
		nb, err := rewriteBody(fb, fix)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		b = appendU32(b, uint32(len(nb)))
		b = append(b, nb...)
	}
	return appendStubs(b), nil
}

// rewriteBody renumbers the function indices of call and ref.func in one function body.
func rewriteBody(body []byte, fix func(uint32) (uint32, error)) ([]byte, error) {
	r := &reader{b: body}
	for n := r.u32(); n > 0; n-- { // locals
		r.u32()
		r.byte()
	}
	out := make([]byte, 0, len(body)+8)
	out = append(out, body[:r.off]...)
	last := r.off
	for !r.eof() && r.err == nil {
		op := r.byte()
		switch {
		case op == 0x10 || op == 0xd2: // call, ref.func
			out = append(out, body[last:r.off]...)
			idx, err := fix(r.u32())
			if err != nil {
				return nil, err
			}
			out = appendU32(out, idx)
			last = r.off
		case op == 0x02 || op == 0x03 || op == 0x04: // block type
			c := r.byte()
			if c != 0x40 && !(c >= 0x6f && c <= 0x7f) {
				r.off--
				r.sleb(5)
			}
		case op == 0x0c || op == 0x0d || (op >= 0x20 && op <= 0x24) || op == 0x25 || op == 0x26 || op == 0xd0:
			if op == 0xd0 {
				r.byte()
			} else {
				r.u32()
			}
		case op == 0x0e: // br_table
			for c := r.u32() + 1; c > 0; c-- {
				r.u32()
			}
		case op == 0x11: // call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			for c := r.u32(); c > 0; c-- {
				r.byte()
			}
		case op >= 0x28 && op <= 0x3e: // loads and stores
			r.u32()
			r.u32()
		case op == 0x3f || op == 0x40:
			r.byte()
		case op == 0x41:
			r.sleb(5)
		case op == 0x42:
			r.sleb(10)
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xfc:
			sub := r.u32()
			switch {
			case sub <= 7:
			case sub == 8:
				r.u32()
				r.byte()
			case sub == 9 || sub == 13:
				r.u32()
			case sub == 10:
				r.byte()
				r.byte()
			case sub == 11:
				r.byte()
			case sub == 12 || sub == 14:
				r.u32()
				r.u32()
			case sub >= 15 && sub <= 17:
				r.u32()
			default:
				return nil, fmt.Errorf("unknown opcode 0xfc %d", sub)
			}
		case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
			(op >= 0x45 && op <= 0xc4) || op == 0xd1:
		default:
			return nil, fmt.Errorf("unknown opcode 0x%02x at %d", op, r.off-1)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(out, body[last:]...), nil
}

// appendStub appends the body of the replacement of WASI function name (type t).
func appendStub(b []byte, name string, t funcType, clock uint32) []byte {
	var code []byte
	i32 := func(v int32) { code = append(code, 0x41); code = appendS(code, int64(v)) }
	ret := func(v int32) { i32(v) }
	locals := []byte{0} // no locals
	switch {
	case name == "proc_exit":
		code = append(code, 0x00) // unreachable: the call traps
	case name == "fd_write" && sig(t, "7f7f7f7f", "7f"):
		// Counts the iovecs' bytes as written (the output goes nowhere).
		locals = []byte{1, 2, 0x7f} // $total, $i
		code = append(code,
			0x02, 0x40, 0x03, 0x40, // block loop
			0x20, 5, 0x20, 2, 0x4f, 0x0d, 1, // i >= iovs_len: br_if 1
			0x20, 4, // total
			0x20, 1, 0x20, 5, 0x41, 3, 0x74, 0x6a, // iovs + i<<3
			0x28, 2, 4, // i32.load offset=4
			0x6a, 0x21, 4, // total += len
			0x20, 5, 0x41, 1, 0x6a, 0x21, 5, // i++
			0x0c, 0, 0x0b, 0x0b, // br 0, end, end
			0x20, 3, 0x20, 4, 0x36, 2, 0, // *nwritten = total
		)
		ret(errnoSuccess)
	case name == "clock_time_get" && sig(t, "7f7e7f", "7f"):
		// A clock that advances 1µs per reading from 0: deterministic.
		code = append(code, 0x23)
		code = appendU32(code, clock)
		code = append(code, 0x42, 0xe8, 0x07, 0x7c, 0x24) // + 1000
		code = appendU32(code, clock)
		code = append(code, 0x20, 2, 0x23)
		code = appendU32(code, clock)
		code = append(code, 0x37, 3, 0)
		ret(errnoSuccess)
	case name == "random_get" && sig(t, "7f7f", "7f"):
		// Zero bytes: the module's hash seeds are the same on every run.
		locals = []byte{1, 1, 0x7f}
		code = append(code,
			0x02, 0x40, 0x03, 0x40,
			0x20, 2, 0x20, 1, 0x4f, 0x0d, 1,
			0x20, 0, 0x20, 2, 0x6a, 0x41, 0, 0x3a, 0, 0, // store8
			0x20, 2, 0x41, 1, 0x6a, 0x21, 2,
			0x0c, 0, 0x0b, 0x0b,
		)
		ret(errnoSuccess)
	case (name == "args_sizes_get" || name == "environ_sizes_get") && sig(t, "7f7f", "7f"):
		code = append(code, 0x20, 0, 0x41, 0, 0x36, 2, 0, 0x20, 1, 0x41, 0, 0x36, 2, 0)
		ret(errnoSuccess)
	case (name == "args_get" || name == "environ_get" || name == "sched_yield") && len(t.results) == 1:
		ret(errnoSuccess)
	case len(t.results) == 1 && t.results[0] == 0x7f && len(name) > 3 && name[:3] == "fd_":
		ret(errnoBadf)
	case len(t.results) == 1 && t.results[0] == 0x7f:
		ret(errnoNosys)
	default:
		code = append(code, 0x00)
	}
	code = append(code, 0x0b)
	fb := append(locals, code...)
	b = appendU32(b, uint32(len(fb)))
	return append(b, fb...)
}

func appendS(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func sig(t funcType, params, results string) bool {
	return fmt.Sprintf("%x", t.params) == params && fmt.Sprintf("%x", t.results) == results
}

// Imports lists a module's imports as "module.name".
func Imports(mod []byte) ([]string, error) {
	if len(mod) < 8 {
		return nil, errors.New("too short")
	}
	r := &reader{b: mod, off: 8}
	var out []string
	for !r.eof() {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if id != 2 {
			continue
		}
		ir := &reader{b: body}
		for n := ir.u32(); n > 0; n-- {
			m := ir.name()
			f := ir.name()
			switch ir.byte() {
			case 0:
				ir.u32()
			case 1:
				ir.byte()
				lim(ir)
			case 2:
				lim(ir)
			case 3:
				ir.byte()
				ir.byte()
			}
			out = append(out, m+"."+f)
		}
		if ir.err != nil {
			return nil, ir.err
		}
	}
	return out, r.err
}

// rewriteNames keeps the function names subsection (renumbered) of a name section's body.
func rewriteNames(body []byte, fix func(uint32) (uint32, error)) ([]byte, error) {
	r := &reader{b: body}
	for !r.eof() {
		id := r.byte()
		sub := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, r.err
		}
		if id != 1 {
			continue
		}
		sr := &reader{b: sub}
		n := sr.u32()
		type entry struct {
			idx  uint32
			name string
		}
		var list []entry
		for ; n > 0; n-- {
			idx, err := fix(sr.u32())
			if err != nil {
				return nil, err
			}
			list = append(list, entry{idx, sr.name()})
		}
		if sr.err != nil {
			return nil, sr.err
		}
		sort.Slice(list, func(i, j int) bool { return list[i].idx < list[j].idx })
		b := appendU32(nil, uint32(len(list)))
		for _, e := range list {
			b = appendU32(b, e.idx)
			b = appendName(b, e.name)
		}
		return append(append([]byte{1}, appendU32(nil, uint32(len(b)))...), b...), nil
	}
	return nil, errors.New("no function names")
}
