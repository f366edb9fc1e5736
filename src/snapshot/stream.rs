//! Streaming a large JSON `List` from a file: a small byte scanner cuts the `items` array into
//! whole items block by block, and worker threads convert the blocks in parallel. Only a few blocks
//! are in memory at once, so a 150,000-pod snapshot never sits in memory as text.

use std::io::Read;
use std::sync::mpsc;

use super::SnapshotBuilder;
use crate::error::ConfigError;

/// Bytes read per block.
const BLOCK: usize = if cfg!(test) { 4096 } else { 2 << 20 };

/// Fewest bytes a pod item takes in a `kubectl get -o json` list (name, namespace, uid, a
/// container, status): with it, the file size bounds the number of pods from above.
const MIN_POD_BYTES: u64 = 400;

/// Scanner state carried across blocks.
#[derive(Default)]
struct Scanner {
    depth: i32,
    in_string: bool,
    escape: bool,
    string_start: usize,
    /// The last string seen at depth 1 (a key or a value).
    last_string: Vec<u8>,
    /// The key whose value is being read at depth 1.
    pending_key: Vec<u8>,
    in_items: bool,
    item_start: Option<usize>,
    list_kind: Option<String>,
    done: bool,
}

/// One block of complete items, with their byte ranges.
struct Batch {
    seq: usize,
    first_index: usize,
    text: Vec<u8>,
    items: Vec<(usize, usize)>,
}

impl Scanner {
    /// Scans `buf[from..]`, recording complete items. Returns `Err` on structure the streaming
    /// path does not handle (the caller falls back to the in-memory loader).
    fn scan(&mut self, buf: &[u8], from: usize, items: &mut Vec<(usize, usize)>) -> Result<(), ()> {
        let mut i = from;
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
                        self.item_start = Some(i);
                    }
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.in_items && self.depth == 2 && c == b'}' {
                        if let Some(start) = self.item_start.take() {
                            items.push((start, i + 1));
                        }
                    } else if self.in_items && self.depth == 1 {
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
}

/// Loads a JSON `List` file by streaming. `Ok(None)`: the file is not a single JSON object with an
/// `items` array read before anything else needs it — use the in-memory loader.
pub fn load_json_list_file(path: &std::path::Path) -> Result<Option<SnapshotBuilder>, ConfigError> {
    let io_err = |e: std::io::Error| {
        ConfigError::new(format!("cannot read snapshot {}: {e}", path.display()))
    };
    let mut file = std::fs::File::open(path).map_err(io_err)?;
    // Merged pods go into one vector: reserving an upper bound up front avoids copying it as it
    // grows (the untouched part is returned by `shrink_pods`).
    let mut merger = Merger::default();
    if let Ok(meta) = file.metadata() {
        let estimate = (meta.len() / MIN_POD_BYTES).min(4_000_000) as usize;
        merger.out.reserve_pods(estimate);
    }
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let (tx, rx) = mpsc::sync_channel::<Batch>(workers);
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let kind_cell: std::sync::Arc<std::sync::OnceLock<Option<String>>> = Default::default();
    let merger = std::sync::Mutex::new(merger);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let rx = rx.clone();
                let kind_cell = kind_cell.clone();
                let merger = &merger;
                scope.spawn(move || -> Result<(), ConfigError> {
                    loop {
                        let batch = match rx.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => {
                                return Err(ConfigError::new("snapshot loader: a worker failed"));
                            }
                        };
                        let Ok(batch) = batch else { return Ok(()) };
                        let text = std::str::from_utf8(&batch.text).map_err(|e| {
                            ConfigError::new(format!("the snapshot is not UTF-8: {e}"))
                        })?;
                        let default_kind = kind_cell.get().cloned().flatten();
                        let default_kind = default_kind
                            .as_deref()
                            .and_then(|k| k.strip_suffix("List"))
                            .filter(|k| !k.is_empty());
                        let mut local = SnapshotBuilder::new();
                        for (n, &(a, b)) in batch.items.iter().enumerate() {
                            let where_ = || format!("items[{}]", batch.first_index + n);
                            super::load::add_json_object_str(
                                &text[a..b],
                                &where_,
                                default_kind,
                                &mut local,
                            )?;
                        }
                        drop(batch.text);
                        match merger.lock() {
                            Ok(mut m) => m.add(batch.seq, local),
                            Err(_) => {
                                return Err(ConfigError::new("snapshot loader: a worker failed"));
                            }
                        }
                    }
                })
            })
            .collect();
        // Only the workers hold the receiver: if they all stop (errors), sending fails instead of
        // blocking.
        drop(rx);
        let produced = produce(&mut file, &tx, &kind_cell, io_err);
        drop(tx);
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => {
                    first_err =
                        first_err.or(Some(ConfigError::new("snapshot loader: a worker panicked")))
                }
            }
        }
        match produced {
            Err(e) => return Err(e),
            Ok(false) => return Ok(None),
            Ok(true) => {}
        }
        // Report the earliest failing item: workers stop at their first error.
        if let Some(e) = first_err {
            return Err(e);
        }
        let mut m = std::mem::take(
            &mut *merger
                .lock()
                .map_err(|_| ConfigError::new("snapshot loader: a worker failed"))?,
        );
        m.out.shrink_pods();
        if !m.pending.is_empty() {
            return Err(ConfigError::new(
                "snapshot loader: a block of items was not converted",
            ));
        }
        Ok(Some(m.out))
    })
}

/// Merges the workers' converted blocks in file order as soon as they are ready, so converted
/// objects are never held twice (per block and merged) for the whole file.
#[derive(Default)]
struct Merger {
    next: usize,
    pending: std::collections::BTreeMap<usize, SnapshotBuilder>,
    out: SnapshotBuilder,
}

impl Merger {
    fn add(&mut self, seq: usize, part: SnapshotBuilder) {
        self.pending.insert(seq, part);
        while let Some(part) = self.pending.remove(&self.next) {
            self.out.merge(part);
            self.next += 1;
        }
    }
}

/// Reads blocks, cuts complete items and sends them to the workers. `Ok(false)`: not streamable.
fn produce(
    file: &mut std::fs::File,
    tx: &mpsc::SyncSender<Batch>,
    kind_cell: &std::sync::OnceLock<Option<String>>,
    io_err: impl Fn(std::io::Error) -> ConfigError,
) -> Result<bool, ConfigError> {
    let mut scanner = Scanner::default();
    let mut buf: Vec<u8> = Vec::with_capacity(BLOCK);
    let (mut seq, mut index, mut scanned) = (0usize, 0usize, 0usize);
    loop {
        let old_len = buf.len();
        buf.resize(old_len + BLOCK, 0);
        let n = file.read(&mut buf[old_len..]).map_err(&io_err)?;
        buf.truncate(old_len + n);
        let mut items = Vec::new();
        if scanner.scan(&buf, scanned, &mut items).is_err() {
            return Ok(false);
        }
        scanned = buf.len();
        if !scanner.in_items && items.is_empty() && seq == 0 && index == 0 && scanner.done {
            // An object without items (or items after the end): not a streamable List.
            return Ok(false);
        }
        if !items.is_empty() {
            if kind_cell.get().is_none() && scanner.list_kind.is_some() {
                let _ = kind_cell.set(scanner.list_kind.clone());
            }
            // Keep the unfinished tail (from the current item's start) for the next block.
            let cut = scanner.item_start.unwrap_or(buf.len());
            let tail = buf[cut..].to_vec();
            let count = items.len();
            buf.truncate(cut);
            let text = std::mem::replace(&mut buf, Vec::with_capacity(BLOCK + tail.len()));
            buf.extend_from_slice(&tail);
            if let Some(start) = scanner.item_start.as_mut() {
                *start -= cut;
            }
            scanner.string_start = scanner.string_start.saturating_sub(cut);
            scanned = buf.len();
            if tx
                .send(Batch {
                    seq,
                    first_index: index,
                    text,
                    items,
                })
                .is_err()
            {
                break;
            }
            seq += 1;
            index += count;
        } else if !scanner.in_items && scanner.item_start.is_none() && buf.len() > 4 * BLOCK {
            // Far into the file with no items array: not the layout we stream.
            return Ok(false);
        }
        if n == 0 {
            break;
        }
    }
    if scanner.depth != 0 || scanner.in_string {
        return Err(ConfigError::new(
            "invalid JSON: the file ends in the middle of an object",
        ));
    }
    Ok(seq > 0 || scanner.done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{Shape, write_cluster};

    fn pods_debug(b: SnapshotBuilder) -> Vec<String> {
        let s = b.build();
        s.pods.iter().map(|p| format!("{p:?}")).collect()
    }

    #[test]
    fn streaming_equals_in_memory_loading_across_block_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let mut bytes = Vec::new();
        write_cluster(
            Shape {
                nodes: 30,
                pods: 400,
                seed: 3,
            },
            &mut bytes,
        )
        .unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let streamed = load_json_list_file(&path).unwrap().expect("streamable");
        // The reference: the in-memory loader on the same bytes.
        let reference = crate::snapshot::load::load_bytes(&bytes).unwrap();
        let a = pods_debug(streamed);
        let b: Vec<String> = reference.pods.iter().map(|p| format!("{p:?}")).collect();
        assert_eq!(a.len(), b.len());
        assert_eq!(a, b, "same pods in the same order");
    }

    #[test]
    fn errors_name_the_item_and_other_layouts_fall_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        let mut text = String::from("{\"kind\":\"List\",\"items\":[");
        for i in 0..200 {
            text.push_str(&format!(
                "{{\"kind\":\"Node\",\"metadata\":{{\"name\":\"n{i}\"}}}},"
            ));
        }
        text.push_str("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"x\"},\"spec\":{\"priority\":\"high\"}}]}");
        std::fs::write(&path, &text).unwrap();
        let e = load_json_list_file(&path).err().expect("an error");
        assert!(
            e.0.contains("items[200]") && e.0.contains("Pod x/p") && e.0.contains("spec.priority"),
            "{}",
            e.0
        );

        let arr = dir.path().join("arr.json");
        std::fs::write(&arr, "[{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}}]").unwrap();
        assert!(
            load_json_list_file(&arr).unwrap().is_none(),
            "arrays use the in-memory loader"
        );

        let cut = dir.path().join("cut.json");
        std::fs::write(&cut, "{\"kind\":\"List\",\"items\":[{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}},{\"kind\":").unwrap();
        assert!(
            load_json_list_file(&cut).is_err(),
            "a truncated file is an error"
        );
        // And through the public entry point, which also handles the fallback.
        let snap = crate::snapshot::load::load_file(&arr).unwrap();
        assert_eq!(snap.nodes.len(), 1);
    }
}
