//! Streaming a large JSON `List` from a file: a scanner ([`scan`]) cuts the `items` array into
//! whole items block by block, and worker threads convert the blocks in parallel while the scanner
//! goes on. A regular file is memory-mapped ([`FileBytes`]): blocks are slices of the page cache,
//! so nothing is copied into buffers of ours (whose fresh pages the kernel would have to zero),
//! and each block's pages are unmapped again once it is converted, so the file never adds up in
//! the resident size. Per-block pod lists are reused rather than allocated (and page-faulted) anew.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use super::SnapshotBuilder;
use crate::error::ConfigError;

mod scan;
use scan::Scanner;

/// Bytes scanned per block.
const BLOCK: usize = if cfg!(test) { 4096 } else { 2 << 20 };

/// Fewest bytes a pod item takes in a `kubectl get -o json` list (name, namespace, uid, a
/// container, status): with it, the file size bounds the number of pods from above.
const MIN_POD_BYTES: usize = 400;

/// A snapshot file's bytes: the file mapped into memory when it is a regular file, else (a pipe,
/// process substitution, or a file system that cannot map) read into memory.
pub struct FileBytes {
    inner: Inner,
}

enum Inner {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl FileBytes {
    /// Maps `file`, or reads it to the end where it cannot be mapped.
    pub fn open(mut file: std::fs::File) -> std::io::Result<Self> {
        if file.metadata().is_ok_and(|m| m.is_file() && m.len() > 0) {
            // SAFETY: the mapping is read-only and the bytes are only read, and validated (UTF-8,
            // JSON) like any input. A file that another process rewrites while it is loaded is read
            // as whatever bytes it holds then; one truncated meanwhile ends the process with
            // SIGBUS — the risk every tool that maps its input takes (a snapshot is a file written
            // once, before `plan` runs).
            if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
                // Read ahead aggressively on a cold cache; a no-op when the file is cached.
                let _ = map.advise(memmap2::Advice::Sequential);
                return Ok(FileBytes {
                    inner: Inner::Mapped(map),
                });
            }
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(FileBytes {
            inner: Inner::Read(bytes),
        })
    }

    /// Gives the pages of `offset..offset + len` back (only whole pages inside the range): they
    /// are done with. A later read of them would map them from the page cache again.
    fn release(&self, offset: usize, len: usize) {
        const PAGE: usize = 4096;
        let Inner::Mapped(map) = &self.inner else {
            return;
        };
        let start = offset.next_multiple_of(PAGE);
        let end = (offset + len) / PAGE * PAGE;
        if end > start {
            // SAFETY: MADV_DONTNEED on a read-only shared file mapping only drops page table
            // entries: a later access maps the same page-cache page again, so any slice of the
            // mapping still in use reads the same bytes (unlike private anonymous memory, which
            // would read back zeros).
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
        }
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.inner {
            Inner::Mapped(map) => map,
            Inner::Read(bytes) => bytes,
        }
    }
}

/// One block of complete items: its text (a slice of the file from byte `offset`) and the items'
/// byte ranges in it.
struct Batch<'f> {
    seq: usize,
    first_index: usize,
    offset: usize,
    text: &'f [u8],
    items: Vec<(usize, usize)>,
}

/// Loads a JSON `List` file by streaming (see [`load_json_list`]).
pub fn load_json_list_file(path: &std::path::Path) -> Result<Option<SnapshotBuilder>, ConfigError> {
    let bytes = std::fs::File::open(path)
        .and_then(FileBytes::open)
        .map_err(|e| ConfigError::new(format!("cannot read snapshot {}: {e}", path.display())))?;
    load_json_list(&bytes)
}

/// Loads a JSON `List` by streaming its items to worker threads. `Ok(None)`: the bytes are not a
/// single JSON object with an `items` array read before anything else needs it — use the
/// in-memory loader.
pub fn load_json_list(bytes: &FileBytes) -> Result<Option<SnapshotBuilder>, ConfigError> {
    // Merged pods go into one vector: reserving an upper bound up front avoids copying it as it
    // grows (the untouched part is returned by `shrink_pods`).
    let mut merger = Merger::default();
    merger
        .out
        .reserve_pods((bytes.len() / MIN_POD_BYTES).min(4_000_000));
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let (tx, rx) = mpsc::sync_channel::<Batch>(workers);
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let shared = Shared {
        bytes,
        kind_cell: std::sync::OnceLock::new(),
        merger: std::sync::Mutex::new(merger),
        first_bad: AtomicUsize::new(usize::MAX),
    };
    std::thread::scope(|scope| {
        let shared = &shared;
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let rx = rx.clone();
                scope.spawn(move || shared.work(&rx))
            })
            .collect();
        // Only the workers hold the receiver: if they all stop (errors), sending fails instead of
        // blocking.
        drop(rx);
        let produced = produce(bytes, &tx, &shared.kind_cell, &shared.first_bad);
        drop(tx);
        // Every block before a failing one was handed out before it (one scanner, FIFO) and is
        // converted to the end by a worker that stops only at its own first error: the smallest
        // failing index is the first bad item of the file, whichever worker found it when.
        let mut first_err: Option<ItemError> = None;
        for h in handles {
            let result = h.join().unwrap_or_else(|_| {
                Err((
                    usize::MAX,
                    ConfigError::new("snapshot loader: a worker panicked"),
                ))
            });
            if let Err(e) = result
                && first_err.as_ref().is_none_or(|f| e.0 < f.0)
            {
                first_err = Some(e);
            }
        }
        // A bad item comes before what the scanner saw later (e.g. the end of the file).
        if let Some((_, e)) = first_err {
            return Err(e);
        }
        shared.finish(produced)
    })
}

/// What the scanner and the workers share while a file is loaded.
struct Shared<'f> {
    bytes: &'f FileBytes,
    /// The list's `kind` (`PodList`, …), once the scanner has read it.
    kind_cell: std::sync::OnceLock<Option<String>>,
    merger: std::sync::Mutex<Merger>,
    /// The index of the first bad item known so far (workers skip blocks after it; the scanner
    /// stops).
    first_bad: AtomicUsize,
}

fn worker_failed() -> ConfigError {
    ConfigError::new("snapshot loader: a worker failed")
}

/// The receiving end of the blocks, shared by the workers.
type Blocks<'f> = std::sync::Arc<std::sync::Mutex<mpsc::Receiver<Batch<'f>>>>;

impl Shared<'_> {
    /// A worker: converts blocks from `rx` until it is closed or an item is bad.
    fn work(&self, rx: &Blocks<'_>) -> Result<(), ItemError> {
        loop {
            let batch = match rx.lock() {
                Ok(r) => r.recv(),
                Err(_) => return Err((usize::MAX, worker_failed())),
            };
            let Ok(batch) = batch else { return Ok(()) };
            // A bad item is known before this block: nothing here can be first.
            if batch.first_index > self.first_bad.load(Ordering::Acquire) {
                continue;
            }
            let fail = |index: usize, e: ConfigError| {
                self.first_bad.fetch_min(index, Ordering::AcqRel);
                (index, e)
            };
            let local = convert(&batch, &self.kind_cell, &self.merger, &fail)?;
            self.bytes.release(batch.offset, batch.text.len());
            self.merger
                .lock()
                .map_err(|_| (usize::MAX, worker_failed()))?
                .add(batch.seq, local);
        }
    }

    /// The merged builder once the workers are done without an error, given how scanning ended.
    fn finish(
        &self,
        produced: Result<Produced, ConfigError>,
    ) -> Result<Option<SnapshotBuilder>, ConfigError> {
        match produced? {
            Produced::NotStreamable => return Ok(None),
            Produced::Stopped => {
                return Err(ConfigError::new(
                    "snapshot loader: stopped reading without an error",
                ));
            }
            Produced::All => {}
        }
        let mut m = std::mem::take(&mut *self.merger.lock().map_err(|_| worker_failed())?);
        m.out.shrink_pods();
        if !m.pending.is_empty() {
            return Err(ConfigError::new(
                "snapshot loader: a block of items was not converted",
            ));
        }
        let mut out = m.out;
        // In the order the API lists objects, as the in-memory loader (`load::load_bytes`).
        out.order_as_listed();
        Ok(Some(out))
    }
}

/// Converts one block's items into a builder of its own.
fn convert(
    batch: &Batch<'_>,
    kind_cell: &std::sync::OnceLock<Option<String>>,
    merger: &std::sync::Mutex<Merger>,
    fail: &dyn Fn(usize, ConfigError) -> ItemError,
) -> Result<SnapshotBuilder, ItemError> {
    let text = std::str::from_utf8(batch.text).map_err(|e| {
        let at = e.valid_up_to();
        let n = batch.items.iter().position(|&(_, b)| at < b).unwrap_or(0);
        fail(
            batch.first_index + n,
            ConfigError::new(format!(
                "items[{}]: not UTF-8 text: {e}",
                batch.first_index + n
            )),
        )
    })?;
    let default_kind = kind_cell.get().cloned().flatten();
    let default_kind = default_kind
        .as_deref()
        .and_then(|k| k.strip_suffix("List"))
        .filter(|k| !k.is_empty());
    let pods = merger
        .lock()
        .map_err(|_| {
            (
                usize::MAX,
                ConfigError::new("snapshot loader: a worker failed"),
            )
        })?
        .spare_pods
        .pop()
        .unwrap_or_default();
    let mut local = SnapshotBuilder::with_pod_buffer(pods);
    // Count the kinds first (the `kind` key is usually near the start), so the lists are
    // allocated once.
    let mut counts = [0usize; 3];
    let peeked: Vec<Option<&str>> = batch
        .items
        .iter()
        .map(|&(a, b)| super::json::peek_kind(&text[a..b]))
        .collect();
    for kind in &peeked {
        match kind.or(default_kind) {
            Some("Pod") => counts[0] += 1,
            Some("ReplicaSet") => counts[1] += 1,
            Some("Deployment") => counts[2] += 1,
            _ => {}
        }
    }
    local.reserve_many(counts[0], counts[1], counts[2]);
    for (n, (&(a, b), &kind)) in batch.items.iter().zip(&peeked).enumerate() {
        let where_ = || format!("items[{}]", batch.first_index + n);
        super::decode::add_peeked_json_object(&text[a..b], kind, &where_, default_kind, &mut local)
            .map_err(|e| fail(batch.first_index + n, e))?;
    }
    Ok(local)
}

/// Merges the workers' converted blocks in file order as soon as they are ready, so converted
/// objects are never held twice (per block and merged) for the whole file.
#[derive(Default)]
struct Merger {
    next: usize,
    pending: std::collections::BTreeMap<usize, SnapshotBuilder>,
    out: SnapshotBuilder,
    /// Emptied per-block pod vectors, for the workers to reuse.
    spare_pods: Vec<Vec<std::sync::Arc<super::Pod>>>,
}

impl Merger {
    fn add(&mut self, seq: usize, part: SnapshotBuilder) {
        self.pending.insert(seq, part);
        while let Some(part) = self.pending.remove(&self.next) {
            let spare = self.out.merge_reusing(part);
            self.spare_pods.push(spare);
            self.next += 1;
        }
    }
}

/// An error and the index of the item it is about (`usize::MAX`: not about an item).
type ItemError = (usize, ConfigError);

/// How scanning ended.
enum Produced {
    /// The whole file was scanned and handed out.
    All,
    /// Not the layout the streaming path handles: use the in-memory loader.
    NotStreamable,
    /// A worker found a bad item, so the rest of the file was not scanned.
    Stopped,
}

/// Scans the bytes block by block, cutting complete items and sending them to the workers.
fn produce<'f>(
    bytes: &'f [u8],
    tx: &mpsc::SyncSender<Batch<'f>>,
    kind_cell: &std::sync::OnceLock<Option<String>>,
    first_bad: &AtomicUsize,
) -> Result<Produced, ConfigError> {
    let mut scanner = Scanner::default();
    let (mut seq, mut index, mut scanned) = (0usize, 0usize, 0usize);
    while scanned < bytes.len() && !scanner.done {
        if first_bad.load(Ordering::Acquire) != usize::MAX {
            return Ok(Produced::Stopped);
        }
        let end = (scanned + BLOCK).min(bytes.len());
        let mut items = Vec::new();
        if scanner.scan(&bytes[..end], scanned, &mut items).is_err() {
            return Ok(Produced::NotStreamable);
        }
        scanned = end;
        if !scanner.in_items && items.is_empty() && seq == 0 && scanner.done {
            // An object without items (or items after the end): not a streamable List.
            return Ok(Produced::NotStreamable);
        }
        if let (Some(&(offset, _)), Some(&(_, stop))) = (items.first(), items.last()) {
            if kind_cell.get().is_none() && scanner.list_kind.is_some() {
                let _ = kind_cell.set(scanner.list_kind.clone());
            }
            for item in &mut items {
                item.0 -= offset;
                item.1 -= offset;
            }
            let count = items.len();
            let batch = Batch {
                seq,
                first_index: index,
                offset,
                text: &bytes[offset..stop],
                items,
            };
            if tx.send(batch).is_err() {
                // Every worker stopped: each at a bad item.
                return Ok(Produced::Stopped);
            }
            seq += 1;
            index += count;
        } else if !scanner.in_items && scanner.item_start.is_none() && scanned > 4 * BLOCK {
            // Far into the file with no items array: not the layout we stream.
            return Ok(Produced::NotStreamable);
        }
    }
    if scanner.depth != 0 || scanner.in_string || scanner.item_depth != 0 {
        return Err(ConfigError::new(
            "invalid JSON: the file ends in the middle of an object",
        ));
    }
    Ok(if seq > 0 || scanner.done {
        Produced::All
    } else {
        Produced::NotStreamable
    })
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

    /// Item texts that stress the scanner: escaped quotes and backslashes, braces and brackets
    /// inside strings, multibyte UTF-8, nesting, and escapes at every offset of a 64-byte chunk.
    fn tricky_items() -> Vec<String> {
        let mut items = vec![
            r#"{"kind":"Node","metadata":{"name":"a\"}b","labels":{"x":"}]{[\\"}}}"#.to_string(),
            r#"{"kind":"Node","metadata":{"name":"\\\"\\","labels":{"é€😀":"😀}"}}}"#.to_string(),
            r#"{"kind":"Node","metadata":{"name":"n"},"spec":{"taints":[{"key":"k","value":"]}","effect":"NoSchedule"}]}}"#
                .to_string(),
            r#"{"a":[[{"b":"\\"}],{"c":{}}],"kind":"Node","metadata":{"name":"{}"}}"#.to_string(),
        ];
        for pad in 0..70 {
            let filler = "x".repeat(pad);
            items.push(format!(
                r#"{{"kind":"Node","metadata":{{"name":"{filler}\"}}\\","labels":{{"k":"{filler}é\\\"{{"}}}}}}"#
            ));
        }
        items
    }

    fn list_text(items: &[String]) -> String {
        format!(
            "{{\"kind\":\"List\",\"apiVersion\":\"v1\",\"items\":[\n{}\n],\"metadata\":{{}}}}",
            items.join(",\n")
        )
    }

    #[test]
    fn scanner_finds_the_items_wherever_the_input_is_cut() {
        #[derive(serde::Deserialize)]
        struct List<'a> {
            #[serde(borrow)]
            items: Vec<&'a serde_json::value::RawValue>,
        }
        let text = list_text(&tricky_items());
        let list: List = serde_json::from_str(&text).expect("valid JSON");
        let base = text.as_ptr() as usize;
        let expected: Vec<(usize, usize)> = list
            .items
            .iter()
            .map(|r| {
                let start = r.get().as_ptr() as usize - base;
                (start, start + r.get().len())
            })
            .collect();
        let bytes = text.as_bytes();
        for step in [1, 2, 3, 7, 63, 64, 65, 100, 127, 1000, bytes.len()] {
            let mut scanner = Scanner::default();
            let mut items = Vec::new();
            let mut scanned = 0;
            let mut end = 0;
            while end < bytes.len() {
                end = (end + step).min(bytes.len());
                scanner.scan(&bytes[..end], scanned, &mut items).unwrap();
                scanned = end;
            }
            assert_eq!(items, expected, "fed {step} bytes at a time");
            assert!(scanner.done && scanner.item_depth == 0 && !scanner.in_string);
        }
    }

    #[test]
    fn streaming_handles_escapes_and_multibyte_text_across_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tricky.json");
        let mut items = tricky_items();
        // Pods whose strings (kept labels and annotations) straddle the 4 KiB test blocks at
        // every offset.
        for i in 0..300 {
            let filler = "ü".repeat(i % 37) + &"z".repeat(i % 11);
            items.push(format!(
                r#"{{"kind":"Pod","metadata":{{"name":"p{i}","namespace":"ns","labels":{{"app":"{filler}\"}}]\\"}},"annotations":{{"descheduler.alpha.kubernetes.io/evict":"{filler}\\\"{{["}}}},"spec":{{"nodeName":"a\"}}b","containers":[{{"image":"i{{\"{filler}"}}]}}}}"#
            ));
        }
        let text = list_text(&items);
        std::fs::write(&path, &text).unwrap();
        assert!(text.len() > 20 * BLOCK, "the file spans many blocks");
        let streamed = load_json_list_file(&path).unwrap().expect("streamable");
        let reference = crate::snapshot::load::load_bytes(text.as_bytes()).unwrap();
        let streamed = streamed.build();
        assert_eq!(streamed.pods.len(), 300);
        assert_eq!(streamed.nodes.len(), reference.nodes.len());
        // Objects come in the API's order (by name), not the file's.
        assert!(streamed.nodes.iter().any(|n| n.name == "a\"}b"));
        assert_eq!(
            streamed
                .pods
                .iter()
                .find(|p| p.name == "p5")
                .and_then(|p| p.labels.get("app"))
                .map(String::as_str),
            Some("üüüüüzzzzz\"}]\\")
        );
        let a: Vec<String> = streamed.pods.iter().map(|p| format!("{p:?}")).collect();
        let b: Vec<String> = reference.pods.iter().map(|p| format!("{p:?}")).collect();
        assert_eq!(a, b, "same pods in the same order");
        let a: Vec<String> = streamed.nodes.iter().map(|n| format!("{n:?}")).collect();
        let b: Vec<String> = reference.nodes.iter().map(|n| format!("{n:?}")).collect();
        assert_eq!(a, b, "same nodes in the same order");
    }

    /// A pipe cannot be mapped: it is read into memory and loaded the same (its first bytes are
    /// read once, not consumed by a peek at the format).
    #[cfg(unix)]
    #[test]
    fn a_named_pipe_is_read_not_mapped_and_loads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        write_cluster(
            Shape {
                nodes: 5,
                pods: 60,
                seed: 9,
            },
            &mut bytes,
        )
        .unwrap();
        let file = dir.path().join("c.json");
        std::fs::write(&file, &bytes).unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("mkfifo is not available: skipped");
            return;
        }
        let writer = {
            let (fifo, bytes) = (fifo.clone(), bytes.clone());
            std::thread::spawn(move || std::fs::write(fifo, bytes))
        };
        let piped = crate::snapshot::load::load_file(&fifo).unwrap();
        writer.join().unwrap().unwrap();
        let mapped = crate::snapshot::load::load_file(&file).unwrap();
        assert_eq!(piped.pods.len(), 60);
        let a: Vec<String> = piped.pods.iter().map(|p| format!("{p:?}")).collect();
        let b: Vec<String> = mapped.pods.iter().map(|p| format!("{p:?}")).collect();
        assert_eq!(a, b, "same pods in the same order");
        assert_eq!(piped.nodes.len(), mapped.nodes.len());
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
