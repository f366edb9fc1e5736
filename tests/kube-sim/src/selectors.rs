//! Label and field selectors (`k8s.io/apimachinery/pkg/labels` and `.../fields` syntax).
use serde_json::Value;
use std::collections::BTreeMap;

use crate::error::ApiError;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
pub enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(pub Vec<Req>);

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

/// A position in a label selector's query-string form; its parse errors say what was expected.
struct Cursor {
    chars: Vec<char>,
    i: usize,
}

impl Cursor {
    fn at_end(&self) -> bool {
        self.i >= self.chars.len()
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    /// Steps over `want` when it is next.
    fn eat(&mut self, want: char) -> bool {
        let found = self.peek() == Some(want);
        if found {
            self.i += 1;
        }
        found
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.i += 1;
        }
    }

    /// The key or value characters from here (possibly none).
    fn word(&mut self) -> String {
        let start = self.i;
        while self.peek().is_some_and(is_key_char) {
            self.i += 1;
        }
        self.chars[start..self.i].iter().collect()
    }

    /// One requirement: `!k`, `k`, `k=v`, `k==v`, `k!=v`, `k in (…)` or `k notin (…)`.
    fn requirement(&mut self) -> Result<Req, String> {
        let negated = self.eat('!');
        if negated {
            self.skip_ws();
        }
        let key = self.word();
        if key.is_empty() {
            return Err("expected a key".into());
        }
        self.skip_ws();
        if negated {
            return Ok(Req::NotExists(key));
        }
        match self.peek() {
            None | Some(',') => Ok(Req::Exists(key)),
            Some(c @ ('=' | '!')) => {
                let ne = c == '!';
                self.i += 1;
                if !self.eat('=') && ne {
                    return Err("expected '=' after '!'".into());
                }
                self.skip_ws();
                let val = self.word();
                Ok(if ne {
                    Req::NotEq(key, val)
                } else {
                    Req::Eq(key, val)
                })
            }
            Some(_) => {
                let op = self.word();
                if op != "in" && op != "notin" {
                    return Err(format!("unknown operator {op:?}"));
                }
                let vals = self.value_set()?;
                Ok(if op == "in" {
                    Req::In(key, vals)
                } else {
                    Req::NotIn(key, vals)
                })
            }
        }
    }

    /// A parenthesised, comma-separated value list; empty values are left out.
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        self.skip_ws();
        if !self.eat('(') {
            return Err("expected '('".into());
        }
        let mut vals = Vec::new();
        loop {
            self.skip_ws();
            let v = self.word();
            self.skip_ws();
            if self.at_end() {
                return Err("expected ')'".into());
            }
            if !v.is_empty() {
                vals.push(v);
            }
            if self.eat(')') {
                return Ok(vals);
            }
            if !self.eat(',') {
                return Err("expected ',' or ')'".into());
            }
        }
    }
}

impl LabelSelector {
    /// Parses the query-string form (`a=b,c!=d,e in (f,g),!h,i`).
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let bad = |why: &str| {
            ApiError::bad_request(format!(
                "unable to parse requirement: {why} in selector {s:?}"
            ))
        };
        let mut c = Cursor {
            chars: s.chars().collect(),
            i: 0,
        };
        let mut reqs = Vec::new();
        loop {
            c.skip_ws();
            if c.at_end() {
                break;
            }
            reqs.push(c.requirement().map_err(|why| bad(&why))?);
            c.skip_ws();
            if !c.at_end() && !c.eat(',') {
                return Err(bad("expected ','"));
            }
        }
        Ok(LabelSelector(reqs))
    }

    /// Converts a `metav1.LabelSelector` JSON object. `None` when it is malformed.
    pub fn from_json(sel: &Value) -> Option<Self> {
        let mut reqs = Vec::new();
        if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in ml {
                reqs.push(Req::Eq(k.clone(), v.as_str()?.to_string()));
            }
        }
        if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e.get("key")?.as_str()?.to_string();
                let vals: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                reqs.push(match e.get("operator")?.as_str()? {
                    "In" => Req::In(key, vals),
                    "NotIn" => Req::NotIn(key, vals),
                    "Exists" => Req::Exists(key),
                    "DoesNotExist" => Req::NotExists(key),
                    _ => return None,
                });
            }
        }
        Some(LabelSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => labels.get(k) == Some(v),
            Req::NotEq(k, v) => labels.get(k) != Some(v),
            Req::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Req::Exists(k) => labels.contains_key(k),
            Req::NotExists(k) => !labels.contains_key(k),
        })
    }

    /// Matches an object's `metadata.labels`.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.is_empty() || self.matches(&labels_of(obj))
    }
}

/// `metadata.labels` as a map.
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A parsed field selector (`spec.nodeName=n1,status.phase!=Running`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses the query form. Any dotted path is accepted (kube-apiserver restricts the
    /// fields per resource; we are deliberately lenient and read the JSON path).
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            out.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(k, eq, v)| {
            let ptr = format!("/{}", k.replace('.', "/"));
            let actual = match obj.pointer(&ptr) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            };
            (actual == *v) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn l(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn parses_all_operators() {
        let s = LabelSelector::parse("a=b, c==d,e!=f,g in (h, i),j notin (k),l,!m").unwrap();
        assert_eq!(s.0.len(), 7);
        let labels = l(&[
            ("a", "b"),
            ("c", "d"),
            ("e", "x"),
            ("g", "i"),
            ("j", "z"),
            ("l", ""),
        ]);
        assert!(s.matches(&labels));
        let mut bad = labels.clone();
        bad.insert("m".into(), "1".into());
        assert!(!s.matches(&bad));
        assert!(LabelSelector::parse("a in b").is_err());
        assert!(LabelSelector::parse("a !x").is_err());
        assert!(LabelSelector::parse("").unwrap().is_empty());
    }

    #[test]
    fn json_selector_and_fields() {
        let sel = LabelSelector::from_json(&json!({"matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}))
        .unwrap();
        assert!(sel.matches(&l(&[("app", "x")])));
        assert!(!sel.matches(&l(&[("app", "x"), ("tier", "db")])));
        let f = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed").unwrap();
        assert!(f.matches(&json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})));
        assert!(!f.matches(&json!({"spec": {"nodeName": "n2"}})));
        assert!(FieldSelector::parse("garbage").is_err());
    }
}
