//! The item scanner of the streaming loader: finds where each item of a JSON `List`'s `items`
//! array begins and ends, block by block, without parsing the items (inside an item it classifies
//! 64 bytes at a time: quotes, backslashes, braces).

/// Scanner state carried across blocks.
#[derive(Default)]
pub(super) struct Scanner {
    pub(super) depth: i32,
    pub(super) in_string: bool,
    pub(super) escape: bool,
    pub(super) string_start: usize,
    /// The last string seen at depth 1 (a key or a value).
    pub(super) last_string: Vec<u8>,
    /// The key whose value is being read at depth 1.
    pub(super) pending_key: Vec<u8>,
    pub(super) in_items: bool,
    pub(super) item_start: Option<usize>,
    /// Inside an item: how many of its braces are open (0 between items).
    pub(super) item_depth: u32,
    pub(super) list_kind: Option<String>,
    pub(super) done: bool,
}

/// Bytes the item scanner classifies at once.
const LANES: usize = 64;

/// Masks (bit `i` = byte `i`) of the bytes that matter inside an item: quotes, backslashes and
/// braces. Brackets need no tracking there: in valid JSON an object's braces balance on their own,
/// and an item that is not valid JSON fails when it is converted.
#[derive(Clone, Copy, Default)]
struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
}

impl Masks {
    /// Classifies 64 bytes: sixteen at a time with SSE2 on x86-64, else eight at a time.
    fn of(chunk: &[u8; LANES]) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 CPU has it.
            unsafe { Self::of_sse2(chunk) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Self::of_swar(chunk)
        }
    }

    /// [`Self::of`] with SSE2: one compare and one byte-mask extraction per byte class and 16
    /// bytes (the SWAR version takes several times as many instructions).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse2")]
    fn of_sse2(chunk: &[u8; LANES]) -> Self {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
        };
        let mut m = Masks::default();
        for (k, part) in chunk.chunks_exact(16).enumerate() {
            // SAFETY: `part` is 16 bytes long; the unaligned load has no alignment requirement.
            let v = unsafe { _mm_loadu_si128(part.as_ptr().cast::<__m128i>()) };
            let shift = 16 * k;
            let bits = |c: u8| -> u64 {
                let eq = _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
                // The mask has 16 bits, one per byte.
                u64::from(_mm_movemask_epi8(eq) as u16) << shift
            };
            m.quote |= bits(b'"');
            m.backslash |= bits(b'\\');
            m.open |= bits(b'{');
            m.close |= bits(b'}');
        }
        m
    }

    /// [`Self::of`] eight bytes at a time (SWAR: bytes compared inside a `u64`).
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn of_swar(chunk: &[u8; LANES]) -> Self {
        const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
        const ONES: u64 = 0x0101_0101_0101_0101;
        // The high bit of each byte of `w` that equals `c` (exact: no false positives).
        let eq = |w: u64, c: u8| -> u64 {
            let t = w ^ (ONES * u64::from(c));
            !(((t & LOW7) + LOW7) | t | LOW7)
        };
        // The high bits of the eight bytes, gathered into the low eight bits.
        let pack = |hi: u64| -> u64 { ((hi >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56 };
        let mut m = Masks::default();
        for (k, word) in chunk.chunks_exact(8).enumerate() {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            let w = u64::from_le_bytes(bytes);
            let shift = k * 8;
            m.quote |= pack(eq(w, b'"')) << shift;
            m.backslash |= pack(eq(w, b'\\')) << shift;
            m.open |= pack(eq(w, b'{')) << shift;
            m.close |= pack(eq(w, b'}')) << shift;
        }
        m
    }
}

/// Bit `i` set when an odd number of bits at or below `i` are set in `x`.
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

impl Scanner {
    /// Scans `buf[from..]`, recording complete items. Returns `Err` on structure the streaming
    /// path does not handle (the caller falls back to the in-memory loader).
    pub(super) fn scan(
        &mut self,
        buf: &[u8],
        from: usize,
        items: &mut Vec<(usize, usize)>,
    ) -> Result<(), ()> {
        let mut i = from;
        if self.item_depth > 0 {
            match self.scan_item(buf, i) {
                Some(end) => i = self.finish_item(end, items),
                None => return Ok(()),
            }
        }
        while i < buf.len() && !self.done {
            let c = buf[i];
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if c == b'\\' {
                    self.escape = true;
                } else if c == b'"' {
                    self.in_string = false;
                    if self.depth == 1 {
                        self.last_string = buf[self.string_start..i].to_vec();
                        if self.pending_key == b"kind" {
                            self.list_kind = String::from_utf8(self.last_string.clone()).ok();
                            self.pending_key.clear();
                        }
                    }
                }
                i += 1;
                continue;
            }
            match c {
                b'"' => {
                    self.in_string = true;
                    self.string_start = i + 1;
                }
                b':' if self.depth == 1 => self.pending_key = std::mem::take(&mut self.last_string),
                b',' if self.depth == 1 => self.pending_key.clear(),
                b'{' | b'[' => {
                    if self.depth == 0 && c != b'{' {
                        return Err(());
                    }
                    if self.depth == 1 && c == b'[' && self.pending_key == b"items" {
                        self.in_items = true;
                    }
                    if self.in_items && self.depth == 2 {
                        if c != b'{' {
                            return Err(());
                        }
                        // An item: find its end with the item scanner.
                        self.item_start = Some(i);
                        self.item_depth = 1;
                        match self.scan_item(buf, i + 1) {
                            Some(end) => {
                                i = self.finish_item(end, items);
                                continue;
                            }
                            None => return Ok(()),
                        }
                    }
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.in_items && self.depth == 1 {
                        self.in_items = false;
                    } else if self.depth == 0 {
                        self.done = true;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }

    /// Records the item that ends before `end`; returns where scanning goes on.
    fn finish_item(&mut self, end: usize, items: &mut Vec<(usize, usize)>) -> usize {
        if let Some(start) = self.item_start.take() {
            items.push((start, end));
        }
        end
    }

    /// Scans inside an item from `buf[from..]`, 64 bytes at a time: returns the end (exclusive)
    /// of the item when its last brace closes, or `None` when `buf` ends first (the state carries
    /// over to the next call). A quote is escaped by an odd run of backslashes before it.
    fn scan_item(&mut self, buf: &[u8], from: usize) -> Option<usize> {
        let mut i = from;
        while let Some(chunk) = buf.get(i..i + LANES) {
            let Ok(chunk) = <&[u8; LANES]>::try_from(chunk) else {
                break;
            };
            let m = Masks::of(chunk);
            let mut escaped = u64::from(self.escape);
            self.escape = false;
            let mut pending = m.backslash;
            while pending != 0 {
                let j = pending.trailing_zeros();
                pending &= pending - 1;
                if escaped & (1 << j) != 0 {
                    continue;
                }
                if j == 63 {
                    self.escape = true;
                } else {
                    escaped |= 1 << (j + 1);
                }
            }
            // Bit set: inside a string (its opening quote included, its closing one not).
            let carry = if self.in_string { u64::MAX } else { 0 };
            let strings = prefix_xor(m.quote & !escaped) ^ carry;
            self.in_string = strings >> 63 == 1;
            let open = m.open & !strings;
            let close = m.close & !strings;
            if close.count_ones() < self.item_depth {
                // The item cannot end in this chunk.
                self.item_depth = self.item_depth + open.count_ones() - close.count_ones();
            } else {
                let mut braces = open | close;
                while braces != 0 {
                    let j = braces.trailing_zeros();
                    braces &= braces - 1;
                    if open & (1 << j) != 0 {
                        self.item_depth += 1;
                    } else {
                        self.item_depth -= 1;
                        if self.item_depth == 0 {
                            self.in_string = false;
                            self.escape = false;
                            return Some(i + j as usize + 1);
                        }
                    }
                }
            }
            i += LANES;
        }
        // Fewer than 64 bytes left: byte by byte, with the same rules.
        while i < buf.len() {
            let c = buf[i];
            i += 1;
            if self.escape {
                self.escape = false;
                continue;
            }
            match c {
                b'\\' => self.escape = true,
                b'"' => self.in_string = !self.in_string,
                b'{' if !self.in_string => self.item_depth += 1,
                b'}' if !self.in_string => {
                    self.item_depth -= 1;
                    if self.item_depth == 0 {
                        self.in_string = false;
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both classifiers mark exactly the quotes, backslashes and braces, at every position.
    #[test]
    fn the_classifiers_agree_on_every_byte_position() {
        let alphabet = b"\"\\{}[]:,a \xc3\xa9\x7f\x80\xff\x00";
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..2000 {
            let mut chunk = [0u8; LANES];
            for b in chunk.iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *b = alphabet[(seed % alphabet.len() as u64) as usize];
            }
            if round == 0 {
                chunk = [b'"'; LANES];
            }
            let expected = |c: u8| -> u64 {
                chunk
                    .iter()
                    .enumerate()
                    .filter(|&(_, &b)| b == c)
                    .fold(0, |m, (i, _)| m | 1 << i)
            };
            for m in [Masks::of(&chunk), Masks::of_swar(&chunk)] {
                assert_eq!(m.quote, expected(b'"'), "{chunk:?}");
                assert_eq!(m.backslash, expected(b'\\'), "{chunk:?}");
                assert_eq!(m.open, expected(b'{'), "{chunk:?}");
                assert_eq!(m.close, expected(b'}'), "{chunk:?}");
            }
        }
    }
}
