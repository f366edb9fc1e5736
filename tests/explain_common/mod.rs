//! Reading `plan -o json --explain` output, shared by the WebAssembly explain tests.

use serde_json::Value;

/// Per asked pod of the report `v` (asserts there are `asked` of them): the pod, and the verdict
/// and detail of the first profile's first plugin.
pub fn verdicts(v: &Value, asked: usize) -> Vec<(String, String, String)> {
    let answers = v["explanations"].as_array().cloned().unwrap_or_default();
    assert_eq!(answers.len(), asked, "{v}");
    let text = |x: &Value| x.as_str().unwrap_or_default().to_string();
    answers
        .iter()
        .map(|a| {
            let verdict = &a["profiles"][0]["plugins"][0];
            (
                text(&a["pod"]),
                text(&verdict["verdict"]),
                text(&verdict["detail"]),
            )
        })
        .collect()
}
