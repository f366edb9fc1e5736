//! Exact parsing of Kubernetes resource quantities into milli-units.
//!
//! Follows the grammar of `k8s.io/apimachinery/pkg/api/resource` (quantity.go docs):
//! `<signedNumber><suffix>` where suffix is a binary SI suffix (`Ki`..`Ei`), a decimal SI
//! suffix (`n`, `u`, `m`, ``, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent (`e3`, `E-2`).
//! Values are converted to milli-units (1 CPU = 1000, 1 byte = 1000) and rounded **up** like the
//! apiserver rounds sub-milli precision (`MilliValue()` of a quantity rounds away from zero).

/// Parses a quantity string into milli-units; `None` when the string is not a valid quantity.
pub fn parse_milli(s: &str) -> Option<i128> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let (negative, rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    // Split the number (digits with at most one dot) from the suffix.
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(num_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return None;
    }
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    // mantissa = digits as integer, scale = number of fractional digits (value = mantissa * 10^-scale).
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return None;
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let mut dec_exp: i32 = -(frac_part.len() as i32);
    let mut binary_mult: i128 = 1;
    match suffix {
        "" => {}
        "n" => dec_exp -= 9,
        "u" => dec_exp -= 6,
        "m" => dec_exp -= 3,
        "k" => dec_exp += 3,
        "M" => dec_exp += 6,
        "G" => dec_exp += 9,
        "T" => dec_exp += 12,
        "P" => dec_exp += 15,
        "E" => dec_exp += 18,
        "Ki" => binary_mult = 1 << 10,
        "Mi" => binary_mult = 1 << 20,
        "Gi" => binary_mult = 1 << 30,
        "Ti" => binary_mult = 1 << 40,
        "Pi" => binary_mult = 1 << 50,
        "Ei" => binary_mult = 1 << 60,
        other => {
            let exp = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))?;
            let exp: i32 = exp.parse().ok()?;
            if exp.unsigned_abs() > 40 {
                return None;
            }
            dec_exp += exp;
        }
    }
    // milli-units: multiply by 1000.
    dec_exp += 3;
    let value = mantissa.checked_mul(binary_mult)?;
    let milli = if dec_exp >= 0 {
        value.checked_mul(10i128.checked_pow(dec_exp as u32)?)?
    } else {
        let div = 10i128.checked_pow((-dec_exp) as u32)?;
        // Round up (away from zero) like Quantity.MilliValue.
        value.checked_add(div - 1)? / div
    };
    Some(if negative { -milli } else { milli })
}

#[cfg(test)]
mod tests {
    use super::parse_milli;

    #[test]
    fn parses_quantities() {
        let cases: &[(&str, Option<i128>)] = &[
            ("1", Some(1000)),
            ("100m", Some(100)),
            ("0.5", Some(500)),
            ("1.5k", Some(1_500_000)),
            ("1Ki", Some(1024 * 1000)),
            ("128Mi", Some(128 * (1 << 20) * 1000)),
            ("1Gi", Some((1 << 30) * 1000)),
            ("2G", Some(2_000_000_000_000)),
            ("1e3", Some(1_000_000)),
            ("1E-3", Some(1)),
            ("1n", Some(1)), // rounds up
            ("1u", Some(1)),
            ("1500u", Some(2)),
            ("0", Some(0)),
            ("-1", Some(-1000)),
            ("+2", Some(2000)),
            ("110", Some(110_000)),
            ("1Ei", Some((1i128 << 60) * 1000)),
            ("1e-2147483648", None),
            ("99999999999999999999999999999999999", None),
            ("999999999999999999999999999999Ei", None),
            ("", None),
            ("abc", None),
            ("1x", None),
            ("1.2.3", None),
            ("m", None),
            (".", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_milli(input), *want, "input {input:?}");
        }
    }
}
