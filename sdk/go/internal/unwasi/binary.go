package unwasi

import "fmt"

// The WebAssembly binary format's primitives: a reader of bytes, LEB128 numbers and names, and
// their writers.

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

func lim(r *reader) {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
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
