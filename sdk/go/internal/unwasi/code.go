package unwasi

import (
	"errors"
	"fmt"
	"sort"
)

// Renumbering function indices inside the sections that hold them: elements, code (call and
// ref.func) and the name section's function names.

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
		default:
			if err := skipImmediates(r, op); err != nil {
				return nil, err
			}
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(out, body[last:]...), nil
}

// skipImmediates reads past the immediates of instruction op (other than call and ref.func).
func skipImmediates(r *reader, op byte) error {
	switch {
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
			return fmt.Errorf("unknown opcode 0xfc %d", sub)
		}
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		(op >= 0x45 && op <= 0xc4) || op == 0xd1:
	default:
		return fmt.Errorf("unknown opcode 0x%02x at %d", op, r.off-1)
	}
	return nil
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
