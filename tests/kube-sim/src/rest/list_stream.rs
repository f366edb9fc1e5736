//! LIST responses streamed item by item: the `…List` envelope, then each object's JSON as
//! the store holds it (or decoded and filtered when selectors or a version conversion need
//! it), in chunks of about 64 KiB. Nothing holds the whole response in memory, and the store
//! lock is only taken to collect references to the stored bytes.
use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::{Value, json};

use crate::resources::ResourceDef;
use crate::store::objects::{self, Bytes as Stored};
use crate::versions;

const CHUNK: usize = 64 * 1024;

/// A filter applied to each decoded object (label and field selectors).
pub type Keep = Box<dyn Fn(&Value) -> bool + Send + Sync>;

/// The object form a client gets for a stored object in a list, or `None` when `keep` drops
/// it. Like kube-apiserver's JSON lists, items carry no `apiVersion` and `kind` (the list names
/// them once).
fn shown(def: &'static ResourceDef, stored: &[u8], keep: Option<&Keep>) -> Option<Vec<u8>> {
    if keep.is_none() && !versions::is_converted(def) {
        // Stored objects are serialized with sorted keys, so they begin with their type.
        let prefix = format!(
            r#"{{"apiVersion":"{}","kind":"{}","#,
            def.api_version(),
            def.kind
        );
        if let Some(rest) = stored.strip_prefix(prefix.as_bytes()) {
            let mut out = Vec::with_capacity(rest.len() + 1);
            out.push(b'{');
            out.extend_from_slice(rest);
            return Some(out);
        }
    }
    let mut v = versions::present(def, objects::decode(stored));
    if keep.is_some_and(|k| !k(&v)) {
        return None;
    }
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
    }
    serde_json::to_vec(&v).ok()
}

/// A 200 response with `{"kind":"<Kind>List","apiVersion":…,"metadata":{"resourceVersion":rv,
/// "continue":…},"items":[…]}` streamed from `items`.
pub fn respond(
    def: &'static ResourceDef,
    rv: u64,
    items: Vec<Stored>,
    keep: Option<Keep>,
    cont: Option<String>,
) -> Response {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        metadata["continue"] = json!(c);
    }
    let head = json!({
        "kind": format!("{}List", def.kind),
        "apiVersion": def.api_version(),
        "metadata": metadata,
    });
    // `{…,"items":[` — the envelope without its closing brace.
    let mut first = serde_json::to_vec(&head).unwrap_or_else(|_| b"{}".to_vec());
    first.pop();
    if first.len() > 1 {
        first.push(b',');
    }
    first.extend_from_slice(b"\"items\":[");
    let mut state = Some((first, items.into_iter(), false));
    let chunks = std::iter::from_fn(move || {
        let (mut buf, mut it, mut any) = state.take()?;
        loop {
            match it.next() {
                Some(stored) => {
                    if let Some(obj) = shown(def, &stored, keep.as_ref()) {
                        if any {
                            buf.push(b',');
                        }
                        any = true;
                        buf.extend_from_slice(&obj);
                    }
                    if buf.len() >= CHUNK {
                        let out = std::mem::take(&mut buf);
                        state = Some((buf, it, any));
                        return Some(Ok::<Bytes, std::convert::Infallible>(Bytes::from(out)));
                    }
                }
                None => {
                    buf.extend_from_slice(b"]}");
                    return Some(Ok(Bytes::from(buf)));
                }
            }
        }
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}
