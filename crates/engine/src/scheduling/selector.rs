//! Label selectors: Kubernetes' string syntax (`a=b,c!=d,e in (x,y),f notin (z),g,!h`) and
//! `metav1.LabelSelector`, both evaluated with `kube_core::Selector`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_core::{Expression, Selector, SelectorExt};

/// Parses a label selector string as `kubectl -l` and `labels.Parse` accept it. Empty = everything.
pub fn parse(input: &str) -> Result<Selector, String> {
    let mut exprs = Vec::new();
    for raw in split_top_level(input)? {
        let term = raw.trim();
        if term.is_empty() {
            continue;
        }
        exprs.push(parse_term(term)?);
    }
    Ok(Selector::from_iter(exprs))
}

/// Splits on commas outside parentheses.
fn split_top_level(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unbalanced ')' in selector {s:?}"));
                }
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in selector {s:?}"));
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn check_key(key: &str, term: &str) -> Result<String, String> {
    let k = key.trim();
    let valid = !k.is_empty()
        && k.len() <= 316
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(k.to_string())
    } else {
        Err(format!("invalid label key {k:?} in selector term {term:?}"))
    }
}

fn parse_set(rest: &str, term: &str) -> Result<Vec<String>, String> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised value list in selector term {term:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn parse_term(term: &str) -> Result<Expression, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(check_key(key, term)?));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(Expression::NotEqual(
            check_key(k, term)?,
            v.trim().to_string(),
        ));
    }
    if let Some((k, v)) = term.split_once("==") {
        return Ok(Expression::Equal(check_key(k, term)?, v.trim().to_string()));
    }
    if let Some((k, v)) = term.split_once('=') {
        return Ok(Expression::Equal(check_key(k, term)?, v.trim().to_string()));
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let rest = words[1].trim_start();
        if let Some(r) = rest.strip_prefix("notin") {
            return Ok(Expression::NotIn(
                check_key(words[0], term)?,
                parse_set(r, term)?.into_iter().collect(),
            ));
        }
        if let Some(r) = rest.strip_prefix("in") {
            return Ok(Expression::In(
                check_key(words[0], term)?,
                parse_set(r, term)?.into_iter().collect(),
            ));
        }
        return Err(format!(
            "unknown operator in selector term {term:?} (expected =, ==, !=, in, notin)"
        ));
    }
    Ok(Expression::Exists(check_key(term, term)?))
}

/// Converts a `metav1.LabelSelector` (an empty selector matches everything).
pub fn compile(sel: &LabelSelector) -> Result<Selector, String> {
    Selector::try_from(sel.clone()).map_err(|e| e.to_string())
}

/// Converts a `metav1.LabelSelector` as `LabelSelectorAsSelector` does: `In` / `NotIn` need
/// values, `Exists` / `DoesNotExist` take none, any other operator is an error.
pub fn compile_strict(sel: &LabelSelector) -> Result<Selector, String> {
    for r in sel.match_expressions.iter().flatten() {
        let n = r.values.as_ref().map_or(0, Vec::len);
        match r.operator.as_str() {
            "In" | "NotIn" if n == 0 => {
                return Err(format!(
                    "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty (key {:?})",
                    r.key
                ));
            }
            "Exists" | "DoesNotExist" if n > 0 => {
                return Err(format!(
                    "values: Invalid value: for 'exists', 'doesnotexist' operators, values set must be empty (key {:?})",
                    r.key
                ));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => return Err(format!("{op:?} is not a valid label selector operator")),
        }
    }
    compile(sel)
}

/// Whether `labels` match `sel`. An invalid selector matches nothing (as a failed
/// `LabelSelectorAsSelector` does upstream).
pub fn matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    compile(sel).is_ok_and(|s| s.matches(labels))
}

/// A label map of `pairs` (for tests).
#[cfg(test)]
pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_operator() {
        let s = parse("a=1, b!=2,c in (x, y),d notin (z),e,!f,g==3").unwrap();
        let ok = labels(&[
            ("a", "1"),
            ("b", "9"),
            ("c", "y"),
            ("d", "q"),
            ("e", ""),
            ("g", "3"),
        ]);
        assert!(s.matches(&ok));
        let mut bad = ok.clone();
        bad.insert("f".into(), "".into());
        assert!(!s.matches(&bad));
        let mut bad = ok.clone();
        bad.insert("c".into(), "w".into());
        assert!(!s.matches(&bad));
        assert!(parse("").unwrap().matches(&labels(&[])));
    }

    #[test]
    fn rejects_malformed_selectors() {
        for bad in ["a in x", "a in (x", "a)", "a b c", "=x", "a@b=1"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
