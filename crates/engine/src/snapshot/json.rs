//! Low-level JSON helpers of the snapshot loader: decoding with field paths in errors, and
//! peeking at an object's `kind` without parsing it.

use serde::Deserialize;

/// Decodes `raw` without path tracking (it costs a third of the decoding time); only when that
/// fails, decodes again with it so the error names the field.
pub(super) fn decode_json<'a, T: Deserialize<'a>>(raw: &'a str) -> Result<T, String> {
    serde_json::from_str::<T>(raw).map_err(|plain| {
        let de = &mut serde_json::Deserializer::from_str(raw);
        match serde_path_to_error::deserialize::<_, T>(de) {
            Ok(_) => plain.to_string(),
            Err(e) => format!("field `{}`: {}", e.path(), e.inner()),
        }
    })
}

/// A status condition as the lean decoders read it (Deployments, Nodes). Like k8s-openapi, an
/// absent or null required field decodes as empty.
#[derive(Deserialize)]
pub(super) struct LeanCondition {
    #[serde(rename = "type")]
    pub(super) type_: Option<String>,
    pub(super) status: Option<String>,
    pub(super) reason: Option<String>,
}

/// Finds the value of the top-level `"kind"` key of a JSON object without parsing the rest
/// (kubectl prints `apiVersion` and `kind` first, so this usually stops after a few bytes).
pub(super) fn peek_kind(raw: &str) -> Option<&str> {
    let b = raw.as_bytes();
    let (mut i, mut depth) = (0usize, 0i32);
    let mut expect_key = false;
    while i < b.len() {
        match b[i] {
            b'{' => {
                depth += 1;
                expect_key = depth == 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            b',' if depth == 1 => expect_key = true,
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                let text = raw.get(start..i.min(b.len()))?;
                if depth == 1 && expect_key {
                    expect_key = false;
                    if text == "kind" {
                        // Skip `:` and whitespace, then read the string value.
                        let rest = raw
                            .get(i + 1..)?
                            .trim_start()
                            .strip_prefix(':')?
                            .trim_start();
                        let value = rest.strip_prefix('"')?;
                        let end = value.find(['"', '\\'])?;
                        return (value.as_bytes().get(end) == Some(&b'"')).then(|| &value[..end]);
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}
