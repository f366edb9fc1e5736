//! The JSON primitives of the fast pod decoder (see `fast.rs`): a cursor over JSON text that
//! reads strings without escapes, integers, booleans, objects, arrays and skipped values, and
//! gives up (`None`) on anything it does not accept exactly as serde would.

use std::borrow::Cow;

use super::Pairs;

/// Nesting allowed inside a skipped value (serde_json stops at 128 levels in all).
const MAX_SKIP_DEPTH: u32 = 100;

/// Known fields already read in one object: serde rejects a repeated field.
pub(super) struct Seen(pub(super) u32);

impl Seen {
    pub(super) fn first(&mut self, bit: u32) -> Option<()> {
        let mask = 1u32 << bit;
        if self.0 & mask != 0 {
            return None;
        }
        self.0 |= mask;
        Some(())
    }
}

/// A cursor over JSON text that reads only the forms pods use; every method returns `None` on
/// anything else.
pub(super) struct Reader<'a> {
    pub(super) s: &'a str,
    pub(super) b: &'a [u8],
    pub(super) i: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    pub(super) fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    pub(super) fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Consumes `word` (a literal such as `null`).
    pub(super) fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.ws();
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// Consumes `null` if it is next.
    pub(super) fn null(&mut self) -> bool {
        self.peek() == Some(b'n') && self.literal(b"null").is_some()
    }

    /// A string without escapes or control characters, borrowed from the input.
    pub(super) fn str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        // Eight bytes at a time to the first quote, backslash or control character (the lowest
        // flagged byte of a word is exact; flags above it may be spurious).
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
        while let Some(word) = self.b.get(self.i..self.i + 8) {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            let w = u64::from_le_bytes(bytes);
            let flagged = zero_byte(w ^ (ONES * u64::from(b'"')))
                | zero_byte(w ^ (ONES * u64::from(b'\\')))
                | (w.wrapping_sub(ONES * 0x20) & !w & HIGH);
            if flagged != 0 {
                self.i += (flagged.trailing_zeros() / 8) as usize;
                break;
            }
            self.i += 8;
        }
        loop {
            match *self.b.get(self.i)? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => self.i += 1,
            }
        }
        let text = self.s.get(start..self.i)?;
        self.i += 1;
        Some(text)
    }

    pub(super) fn cow(&mut self) -> Option<Cow<'a, str>> {
        self.str().map(Cow::Borrowed)
    }

    /// `null` as `None`, anything else read by `f`.
    pub(super) fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.null() {
            return Some(None);
        }
        f(self).map(Some)
    }

    pub(super) fn opt_str(&mut self) -> Option<Option<Cow<'a, str>>> {
        self.opt(Self::cow)
    }

    pub(super) fn boolean(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| true),
            b'f' => self.literal(b"false").map(|()| false),
            _ => None,
        }
    }

    /// An integer written plainly (no fraction or exponent) that fits an `i32`.
    pub(super) fn int32(&mut self) -> Option<i32> {
        self.ws();
        let start = self.i;
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let digits = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        let n = self.i - digits;
        let leading_zero = self.b.get(digits) == Some(&b'0');
        // serde_json reads `-0` as a float, which is no `i32`.
        if n == 0 || n > 10 || (leading_zero && (n > 1 || digits > start)) {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.b.get(self.i) {
            return None;
        }
        self.s.get(start..self.i)?.parse().ok()
    }

    /// Calls `f` with each key of an object; `f` reads the value.
    pub(super) fn object(
        &mut self,
        mut f: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.str()?;
            self.eat(b':')?;
            f(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Calls `f` for each element of an array; `f` reads it.
    pub(super) fn array(&mut self, mut f: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            f(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    pub(super) fn vec<T>(&mut self, mut f: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let mut out = Vec::new();
        self.array(|p| {
            out.push(f(p)?);
            Some(())
        })?;
        Some(out)
    }

    /// Skips one valid JSON value (strings without escapes).
    pub(super) fn skip(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_SKIP_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.str().map(drop),
            b'{' => self.object(|p, _| p.skip(depth + 1)),
            b'[' => self.array(|p| p.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// Skips a number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    pub(super) fn number(&mut self) -> Option<()> {
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let digits = |p: &mut Self| {
            let start = p.i;
            while p.b.get(p.i).is_some_and(u8::is_ascii_digit) {
                p.i += 1;
            }
            p.i - start
        };
        match self.b.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return None,
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return None;
            }
        }
        Some(())
    }

    /// The text of the next value (validated by skipping it).
    pub(super) fn raw(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.i;
        self.skip(0)?;
        self.s.get(start..self.i)
    }

    /// A value decoded by serde from its own text (the Kubernetes types kept whole).
    pub(super) fn typed<T: serde::de::DeserializeOwned>(&mut self) -> Option<T> {
        serde_json::from_str(self.raw()?).ok()
    }

    /// A string map; `null` is empty. Values other than strings: `None` (serde converts them).
    pub(super) fn pairs(&mut self) -> Option<Pairs<'a>> {
        let mut v = Vec::new();
        if self.null() {
            return Some(Pairs(v));
        }
        self.object(|p, key| {
            v.push((Cow::Borrowed(key), p.cow()?));
            Some(())
        })?;
        Some(Pairs(v))
    }

    /// `Option<IgnoredAny>`: whether a non-null value is present.
    pub(super) fn present(&mut self) -> Option<bool> {
        Some(self.opt(|p| p.skip(0))?.is_some())
    }
}
