//! Go `time.Duration` strings (`metav1.Duration` in policy files, duration flags): the parser and
//! its serde helper.

use serde::Deserialize;

/// Parses a Go `time.Duration` string (`300ms`, `1.5h`, `2h45m`, `-1m`, `0`) as `metav1.Duration`
/// accepts it.
pub fn parse_go_duration(input: &str) -> Result<std::time::Duration, String> {
    let s = input.trim();
    let err = || format!("invalid duration {input:?} (expected e.g. \"30s\", \"5m\", \"1h30m\")");
    if s == "0" {
        return Ok(std::time::Duration::ZERO);
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(format!("invalid duration {input:?}: must not be negative"));
    }
    if s.is_empty() {
        return Err(err());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(err());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| err())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total += value * unit;
    }
    if !total.is_finite() || total > 1e12 {
        return Err(err());
    }
    Ok(std::time::Duration::from_secs_f64(total))
}

/// Deserializes an optional Go duration string field.
pub fn de_opt_duration<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    s.map(|s| parse_go_duration(&s).map_err(serde::de::Error::custom))
        .transpose()
}

#[cfg(test)]
mod duration_tests {
    use super::parse_go_duration;
    use std::time::Duration;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_go_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_go_duration("1h30m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("1.5h").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("300ms").unwrap(),
            Duration::from_millis(300)
        );
        for bad in ["", "5", "1d", "m", "-1s", "1h-1m"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }
}
