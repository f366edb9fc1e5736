package unwasi

import (
	"errors"
	"fmt"
)

// writer writes the rewritten module, section by section.
type writer struct {
	m   *parsed
	out []byte
	// clockGlobal is the index of the replacement clock's global, appended after the module's
	// globals (Go imports none).
	clockGlobal uint32
	addedGlobal bool
	addedStart  bool
}

func (w *writer) emit(id byte, body []byte) {
	w.out = append(w.out, id)
	w.out = appendU32(w.out, uint32(len(body)))
	w.out = append(w.out, body...)
}

// write is the module with the WASI imports replaced and the start section added.
func (m *parsed) write() ([]byte, error) {
	w := &writer{m: m, out: append([]byte(nil), m.head...)}
	if i := m.find(6); i >= 0 {
		gr := &reader{b: m.secs[i].body}
		w.clockGlobal = gr.u32()
	}
	for _, s := range m.secs {
		// Sections appear in id order (custom sections anywhere); the start section (8) goes
		// before the element section (9), or else before whatever follows the exports.
		if m.initOld >= 0 && !w.addedStart && s.id > 7 && s.id != 0 && s.id != 12 {
			w.emit(8, appendU32(nil, m.remap[m.initOld]))
			w.addedStart = true
		}
		if err := w.section(s); err != nil {
			return nil, err
		}
		if s.id == 2 && m.find(3) < 0 {
			return nil, errors.New("the module defines no functions")
		}
		if s.id == 5 && m.find(6) < 0 && !w.addedGlobal {
			// No global section: add one after memory.
			w.emit(6, []byte{1, 0x7e, 0x01, 0x42, 0x00, 0x0b})
			w.addedGlobal = true
		}
	}
	if m.initOld >= 0 && !w.addedStart {
		return nil, errors.New("no place for the start section")
	}
	if !w.addedGlobal {
		return nil, errors.New("no place for the clock global (no memory or global section)")
	}
	return w.out, nil
}

// section writes one section, rewritten where it names functions or imports.
func (w *writer) section(s section) error {
	m := w.m
	switch s.id {
	case 0:
		w.custom(s)
	case 2:
		b := appendU32(nil, uint32(len(m.keptImports)))
		for _, ki := range m.keptImports {
			b = append(b, ki...)
		}
		w.emit(2, b)
	case 3:
		b := appendU32(nil, uint32(len(m.funcTypes)+len(m.removed)))
		for _, t := range m.funcTypes {
			b = appendU32(b, t)
		}
		for _, f := range m.removed {
			b = appendU32(b, f.typ)
		}
		w.emit(3, b)
	case 6:
		gr := &reader{b: s.body}
		n := gr.u32()
		b := appendU32(nil, n+1)
		b = append(b, s.body[gr.off:]...)
		b = append(b, 0x7e, 0x01, 0x42, 0x00, 0x0b) // mut i64 = 0
		w.emit(6, b)
		w.addedGlobal = true
	case 7:
		b, err := m.exports(s.body)
		if err != nil {
			return err
		}
		w.emit(7, b)
	case 8:
		sr := &reader{b: s.body}
		idx, err := m.fix(sr.u32())
		if err != nil {
			return fmt.Errorf("start section: %w", err)
		}
		w.emit(8, appendU32(nil, idx))
	case 9:
		b, err := rewriteElements(s.body, m.fix)
		if err != nil {
			return fmt.Errorf("element section: %w", err)
		}
		w.emit(9, b)
	case 10:
		b, err := rewriteCode(s.body, m.fix, w.appendStubs, len(m.removed))
		if err != nil {
			return fmt.Errorf("code section: %w", err)
		}
		w.emit(10, b)
	default:
		w.emit(s.id, s.body)
	}
	return nil
}

// custom writes a custom section: the name section renumbered (dropped when it cannot be), any
// other unchanged.
func (w *writer) custom(s section) {
	sr := &reader{b: s.body}
	if sr.name() == "name" {
		if nb, err := rewriteNames(s.body[sr.off:], w.m.fix); err == nil {
			w.emit(0, append(appendName(nil, "name"), nb...))
		}
		return
	}
	w.emit(0, s.body)
}

// appendStubs appends the replacements' bodies, in the removed imports' order.
func (w *writer) appendStubs(b []byte) []byte {
	for _, f := range w.m.removed {
		b = appendStub(b, f.name, w.m.types[f.typ], w.clockGlobal)
	}
	return b
}

// exports is the export section without _initialize (it is the start function now), renumbered.
func (m *parsed) exports(body []byte) ([]byte, error) {
	er := &reader{b: body}
	n := er.u32()
	var b []byte
	kept := 0
	for ; n > 0; n-- {
		name := er.name()
		kind := er.byte()
		idx := er.u32()
		if kind == 0 {
			if name == "_initialize" {
				continue
			}
			var err error
			if idx, err = m.fix(idx); err != nil {
				return nil, fmt.Errorf("export %q: %w", name, err)
			}
		}
		b = appendName(b, name)
		b = append(b, kind)
		b = appendU32(b, idx)
		kept++
	}
	return append(appendU32(nil, uint32(kept)), b...), nil
}
