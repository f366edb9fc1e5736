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
