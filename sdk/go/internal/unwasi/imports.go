package unwasi

import "errors"

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
			if kind := ir.byte(); kind == 0 {
				ir.u32()
			} else {
				skipNonFunctionDesc(ir, kind)
			}
			out = append(out, m+"."+f)
		}
		if ir.err != nil {
			return nil, ir.err
		}
	}
	return out, r.err
}

// skipNonFunctionDesc reads past the type of an imported table (kind 1), memory (2) or global
// (3); it reports false, reading nothing, for any other kind.
func skipNonFunctionDesc(r *reader, kind byte) bool {
	switch kind {
	case 1:
		r.byte()
		lim(r)
	case 2:
		lim(r)
	case 3:
		r.byte()
		r.byte()
	default:
		return false
	}
	return true
}
