//! Exact Kubernetes `resource.Quantity` parsing.
//!
//! Quantities are parsed into an exact value in milli-units (`i128`), so `"1.5Gi"`, `"500m"`,
//! `"1e3"` and `"0.1"` are all exact. Conversions round up, as Kubernetes does for `Value()` and
//! `MilliValue()`.

use std::fmt;

/// A quantity that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}: {why}")]
pub struct QuantityError {
    /// The text that failed to parse.
    pub input: String,
    /// What was wrong with it.
    pub why: &'static str,
}

/// A parsed quantity, stored exactly in milli-units (1 = 0.001).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Quantity {
    milli: i128,
}

impl Quantity {
    /// Parses a quantity string such as `100m`, `1.5Gi`, `2e3`, `128974848`.
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        Self::parse_milli(input.trim())
            .map(|milli| Quantity { milli })
            .map_err(|why| QuantityError {
                input: input.to_string(),
                why,
            })
    }

    /// The value of `s` (trimmed) in milli-units, or what is wrong with it.
    fn parse_milli(s: &str) -> Result<i128, &'static str> {
        if s.is_empty() {
            return Err("empty");
        }
        let (negative, body) = match s.as_bytes()[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        // Split number and suffix: digits and at most one '.'.
        let num_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(num_end);
        let (mantissa, frac_len) = mantissa(number)?;
        let (pow10, binary) = suffix_scale(suffix)?;
        let value = milli_of(mantissa, binary, pow10 - frac_len)?;
        Ok(if negative { -value } else { value })
    }

    /// Builds a quantity from a whole number of units.
    pub fn from_units(units: i64) -> Self {
        Quantity {
            milli: units as i128 * 1000,
        }
    }

    /// The value in milli-units, rounded up (Kubernetes `MilliValue`).
    pub fn milli_value(&self) -> i64 {
        self.milli.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// The value in whole units, rounded up (Kubernetes `Value`).
    pub fn value(&self) -> i64 {
        ceil_div(self.milli, 1000).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.milli % 1000 == 0 {
            write!(f, "{}", self.milli / 1000)
        } else {
            write!(f, "{}m", self.milli)
        }
    }
}

/// The digits of `number` (with at most one `.`) as an integer, and the number of digits after
/// the point.
fn mantissa(number: &str) -> Result<(i128, i32), &'static str> {
    if number.is_empty() || number == "." {
        return Err("expected a number");
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if frac_part.contains('.') {
        return Err("more than one decimal point");
    }
    // Value = digits * 10^(-frac_len) * multiplier; work in a (numerator, pow10) form.
    if int_part.len() + frac_part.len() > 30 {
        return Err("too many digits");
    }
    let mut mantissa: i128 = 0;
    for c in int_part.bytes().chain(frac_part.bytes()) {
        if !c.is_ascii_digit() {
            return Err("expected digits");
        }
        mantissa = mantissa * 10 + i128::from(c - b'0');
    }
    Ok((mantissa, frac_part.len() as i32))
}

/// A suffix's multiplier as `(power of ten, power of two)`: SI (`m`, `k`, `G`, …), binary (`Ki`,
/// `Mi`, …) or a decimal exponent (`e3`, `E-2`).
fn suffix_scale(suffix: &str) -> Result<(i32, u32), &'static str> {
    Ok(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => {
            let exp = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))
                .ok_or("unknown suffix")?;
            let e: i32 = exp.parse().map_err(|_| "invalid exponent")?;
            if !(-40..=40).contains(&e) {
                return Err("exponent out of range");
            }
            (e, 0)
        }
    })
}

/// `mantissa * 2^binary * 10^pow10` in milli-units, rounded up (away from zero for positives).
fn milli_of(mantissa: i128, binary: u32, pow10: i32) -> Result<i128, &'static str> {
    let mut value = mantissa
        .checked_mul(1i128 << binary)
        .ok_or("value too large")?;
    let scale = pow10 + 3;
    if scale >= 0 {
        for _ in 0..scale {
            value = value.checked_mul(10).ok_or("value too large")?;
        }
    } else {
        let mut divisor: i128 = 1;
        for _ in 0..(-scale) {
            divisor = divisor.checked_mul(10).ok_or("value too small")?;
        }
        value = ceil_div(value, divisor);
    }
    if value > i64::MAX as i128 * 1000 {
        return Err("value too large");
    }
    Ok(value)
}

fn ceil_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && a > 0 { q + 1 } else { q }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exact_values() {
        let cases: &[(&str, i64, i64)] = &[
            ("1", 1000, 1),
            ("100m", 100, 1),
            ("500m", 500, 1),
            ("1.5", 1500, 2),
            ("0.1", 100, 1),
            ("1Ki", 1_024_000, 1024),
            ("1.5Gi", 1_610_612_736_000, 1_610_612_736),
            ("128974848", 128_974_848_000, 128_974_848),
            ("129e6", 129_000_000_000, 129_000_000),
            ("123Mi", 128_974_848_000, 128_974_848),
            ("1k", 1_000_000, 1000),
            ("1E3", 1_000_000, 1000),
            ("2e-3", 2, 1),
            ("1n", 1, 1),
            ("1u", 1, 1),
            ("-1", -1000, -1),
            ("+5", 5000, 5),
            ("110", 110_000, 110),
        ];
        for (input, milli, value) in cases {
            let q = Quantity::parse(input).unwrap();
            assert_eq!(q.milli_value(), *milli, "milli of {input}");
            assert_eq!(q.value(), *value, "value of {input}");
        }
    }

    #[test]
    fn rejects_garbage_with_reason() {
        for bad in [
            "",
            "abc",
            "1.2.3",
            "1Xi",
            "1e",
            "e3",
            ".",
            "1ee3",
            "9999999999999999999999999999999999",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} must be rejected");
        }
        let e = Quantity::parse("12q").unwrap_err();
        assert!(
            e.to_string().contains("12q") && e.to_string().contains("suffix"),
            "{e}"
        );
    }
}
