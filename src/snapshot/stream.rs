//! Streaming a large JSON `List` from a file: a scanner cuts the `items` array into whole items
//! block by block (inside an item it classifies 64 bytes at a time: quotes, backslashes, braces),
//! and worker threads convert the blocks in parallel. Only a few blocks are in memory at once, so a
//! 150,000-pod snapshot never sits in memory as text; block buffers and per-block pod lists are
//! reused rather than allocated (and page-faulted) anew.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    /// Inside an item: how many of its braces are open (0 between items).
    item_depth: u32,
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

/// Bytes the item scanner classifies at once.
const LANES: usize = 64;

/// Masks (bit `i` = byte `i`) of the bytes that matter inside an item: quotes, backslashes and
/// braces. Brackets need no tracking there: in valid JSON an object's braces balance on their own,
/// and an item that is not valid JSON fails when it is converted.
#[derive(Clone, Copy)]
struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
}

impl Masks {
    /// Classifies 64 bytes, eight at a time (SWAR: bytes compared inside a `u64`).
    fn of(chunk: &[u8; LANES]) -> Self {
        const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
        const ONES: u64 = 0x0101_0101_0101_0101;
        // The high bit of each byte of `w` that equals `c` (exact: no false positives).
        let eq = |w: u64, c: u8| -> u64 {
            let t = w ^ (ONES * u64::from(c));
            !(((t & LOW7) + LOW7) | t | LOW7)
        };
        // The high bits of the eight bytes, gathered into the low eight bits.
        let pack = |hi: u64| -> u64 { ((hi >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56 };
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        for (k, word) in chunk.chunks_exact(8).enumerate() {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            let w = u64::from_le_bytes(bytes);
            let shift = k * 8;
            m.quote |= pack(eq(w, b'"')) << shift;
            m.backslash |= pack(eq(w, b'\\')) << shift;
            m.open |= pack(eq(w, b'{')) << shift;
            m.close |= pack(eq(w, b'}')) << shift;
        }
        m
    }
}

/// Bit `i` set when an odd number of bits at or below `i` are set in `x`.
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

impl Scanner {
    /// Scans `buf[from..]`, recording complete items. Returns `Err` on structure the streaming
    /// path does not handle (the caller falls back to the in-memory loader).
    fn scan(&mut self, buf: &[u8], from: usize, items: &mut Vec<(usize, usize)>) -> Result<(), ()> {
        let mut i = from;
        if self.item_depth > 0 {
            match self.scan_item(buf, i) {
                Some(end) => i = self.finish_item(end, items),
                None => return Ok(()),
            }
        }
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
                        // An item: find its end with the item scanner.
                        self.item_start = Some(i);
                        self.item_depth = 1;
                        match self.scan_item(buf, i + 1) {
                            Some(end) => {
                                i = self.finish_item(end, items);
                                continue;
                            }
                            None => return Ok(()),
                        }
                    }
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.in_items && self.depth == 1 {
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

    /// Records the item that ends before `end`; returns where scanning goes on.
    fn finish_item(&mut self, end: usize, items: &mut Vec<(usize, usize)>) -> usize {
        if let Some(start) = self.item_start.take() {
            items.push((start, end));
        }
        end
    }

    /// Scans inside an item from `buf[from..]`, 64 bytes at a time: returns the end (exclusive)
    /// of the item when its last brace closes, or `None` when `buf` ends first (the state carries
    /// over to the next call). A quote is escaped by an odd run of backslashes before it.
    fn scan_item(&mut self, buf: &[u8], from: usize) -> Option<usize> {
        let mut i = from;
        while let Some(chunk) = buf.get(i..i + LANES) {
            let Ok(chunk) = <&[u8; LANES]>::try_from(chunk) else {
                break;
            };
            let m = Masks::of(chunk);
            let mut escaped = u64::from(self.escape);
            self.escape = false;
            let mut pending = m.backslash;
            while pending != 0 {
                let j = pending.trailing_zeros();
                pending &= pending - 1;
                if escaped & (1 << j) != 0 {
                    continue;
                }
                if j == 63 {
                    self.escape = true;
                } else {
                    escaped |= 1 << (j + 1);
                }
            }
            // Bit set: inside a string (its opening quote included, its closing one not).
            let carry = if self.in_string { u64::MAX } else { 0 };
            let strings = prefix_xor(m.quote & !escaped) ^ carry;
            self.in_string = strings >> 63 == 1;
            let open = m.open & !strings;
            let close = m.close & !strings;
            if close.count_ones() < self.item_depth {
                // The item cannot end in this chunk.
                self.item_depth = self.item_depth + open.count_ones() - close.count_ones();
            } else {
                let mut braces = open | close;
                while braces != 0 {
                    let j = braces.trailing_zeros();
                    braces &= braces - 1;
                    if open & (1 << j) != 0 {
                        self.item_depth += 1;
                    } else {
                        self.item_depth -= 1;
                        if self.item_depth == 0 {
                            self.in_string = false;
                            self.escape = false;
                            return Some(i + j as usize + 1);
                        }
                    }
                }
            }
            i += LANES;
        }
        // Fewer than 64 bytes left: byte by byte, with the same rules.
        while i < buf.len() {
            let c = buf[i];
            i += 1;
            if self.escape {
                self.escape = false;
                continue;
            }
            match c {
                b'\\' => self.escape = true,
                b'"' => self.in_string = !self.in_string,
                b'{' if !self.in_string => self.item_depth += 1,
                b'}' if !self.in_string => {
                    self.item_depth -= 1;
                    if self.item_depth == 0 {
                        self.in_string = false;
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        None
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
    // Converted blocks' text buffers go back to the reader, so their memory is reused.
    let (recycle_tx, recycle_rx) = mpsc::channel::<Vec<u8>>();
    let kind_cell: std::sync::Arc<std::sync::OnceLock<Option<String>>> = Default::default();
    let merger = std::sync::Mutex::new(merger);
    let failed = || ConfigError::new("snapshot loader: a worker failed");
    // The index of the first bad item known so far (workers skip blocks after it; the reader
    // stops reading).
    let first_bad = AtomicUsize::new(usize::MAX);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let rx = rx.clone();
                let kind_cell = kind_cell.clone();
                let merger = &merger;
                let recycle_tx = recycle_tx.clone();
                let first_bad = &first_bad;
                scope.spawn(move || -> Result<(), ItemError> {
                    loop {
                        let batch = match rx.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => return Err((usize::MAX, failed())),
                        };
                        let Ok(batch) = batch else { return Ok(()) };
                        // A bad item is known before this block: nothing here can be first.
                        if batch.first_index > first_bad.load(Ordering::Acquire) {
                            continue;
                        }
                        let fail = |index: usize, e: ConfigError| {
                            first_bad.fetch_min(index, Ordering::AcqRel);
                            (index, e)
                        };
                        let text = std::str::from_utf8(&batch.text).map_err(|e| {
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
                            .map_err(|_| (usize::MAX, failed()))?
                            .spare_pods
                            .pop()
                            .unwrap_or_default();
                        let mut local = SnapshotBuilder::with_pod_buffer(pods);
                        // Count the kinds first (the `kind` key is usually near the start), so
                        // the lists are allocated once.
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
                            super::decode::add_peeked_json_object(
                                &text[a..b],
                                kind,
                                &where_,
                                default_kind,
                                &mut local,
                            )
                            .map_err(|e| fail(batch.first_index + n, e))?;
                        }
                        // The reader may have stopped; then the buffer is simply dropped.
                        let _ = recycle_tx.send(batch.text);
                        merger
                            .lock()
                            .map_err(|_| (usize::MAX, failed()))?
                            .add(batch.seq, local);
                    }
                })
            })
            .collect();
        // Only the workers hold the receiver: if they all stop (errors), sending fails instead of
        // blocking.
        drop(rx);
        drop(recycle_tx);
        let produced = produce(&mut file, &tx, &recycle_rx, &kind_cell, &first_bad, io_err);
        drop(tx);
        // Every block before a failing one was handed out before it (one reader, FIFO) and is
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
        // A bad item comes before what the reader saw later (e.g. the end of the file).
        if let Some((_, e)) = first_err {
            return Err(e);
        }
        match produced {
            Err(e) => return Err(e),
            Ok(Produced::NotStreamable) => return Ok(None),
            Ok(Produced::Stopped) => {
                return Err(ConfigError::new(
                    "snapshot loader: stopped reading without an error",
                ));
            }
            Ok(Produced::All) => {}
        }
        let mut m = std::mem::take(&mut *merger.lock().map_err(|_| failed())?);
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

/// How reading ended.
enum Produced {
    /// The whole file was read and handed out.
    All,
    /// Not the layout the streaming path handles: use the in-memory loader.
    NotStreamable,
    /// A worker found a bad item, so the rest of the file was not read.
    Stopped,
}

/// Reads blocks, cuts complete items and sends them to the workers.
fn produce(
    file: &mut std::fs::File,
    tx: &mpsc::SyncSender<Batch>,
    recycled: &mpsc::Receiver<Vec<u8>>,
    kind_cell: &std::sync::OnceLock<Option<String>>,
    first_bad: &AtomicUsize,
    io_err: impl Fn(std::io::Error) -> ConfigError,
) -> Result<Produced, ConfigError> {
    let mut scanner = Scanner::default();
    let mut buf: Vec<u8> = Vec::with_capacity(BLOCK);
    let (mut seq, mut index, mut scanned) = (0usize, 0usize, 0usize);
    loop {
        if first_bad.load(Ordering::Acquire) != usize::MAX {
            return Ok(Produced::Stopped);
        }
        // Reads straight into spare capacity (no zeroing), up to a block or the end of the file.
        buf.reserve(BLOCK);
        let n = Read::take(&mut *file, BLOCK as u64)
            .read_to_end(&mut buf)
            .map_err(&io_err)?;
        let mut items = Vec::new();
        if scanner.scan(&buf, scanned, &mut items).is_err() {
            return Ok(Produced::NotStreamable);
        }
        scanned = buf.len();
        if !scanner.in_items && items.is_empty() && seq == 0 && index == 0 && scanner.done {
            // An object without items (or items after the end): not a streamable List.
            return Ok(Produced::NotStreamable);
        }
        if !items.is_empty() {
            if kind_cell.get().is_none() && scanner.list_kind.is_some() {
                let _ = kind_cell.set(scanner.list_kind.clone());
            }
            // Keep the unfinished tail (from the current item's start) for the next block.
            let cut = scanner.item_start.unwrap_or(buf.len());
            let mut next = recycled.try_recv().unwrap_or_default();
            next.clear();
            next.reserve(BLOCK + (buf.len() - cut));
            next.extend_from_slice(&buf[cut..]);
            buf.truncate(cut);
            let text = std::mem::replace(&mut buf, next);
            if let Some(start) = scanner.item_start.as_mut() {
                *start -= cut;
            }
            scanner.string_start = scanner.string_start.saturating_sub(cut);
            scanned = buf.len();
            let count = items.len();
            if tx
                .send(Batch {
                    seq,
                    first_index: index,
                    text,
                    items,
                })
                .is_err()
            {
                // Every worker stopped: each at a bad item.
                return Ok(Produced::Stopped);
            }
            seq += 1;
            index += count;
        } else if !scanner.in_items && scanner.item_start.is_none() && buf.len() > 4 * BLOCK {
            // Far into the file with no items array: not the layout we stream.
            return Ok(Produced::NotStreamable);
        }
        if n == 0 {
            break;
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
        assert_eq!(streamed.nodes[0].name, "a\"}b");
        assert_eq!(
            streamed.pods[5].labels.get("app").map(String::as_str),
            Some("üüüüüzzzzz\"}]\\")
        );
        let a: Vec<String> = streamed.pods.iter().map(|p| format!("{p:?}")).collect();
        let b: Vec<String> = reference.pods.iter().map(|p| format!("{p:?}")).collect();
        assert_eq!(a, b, "same pods in the same order");
        let a: Vec<String> = streamed.nodes.iter().map(|n| format!("{n:?}")).collect();
        let b: Vec<String> = reference.nodes.iter().map(|n| format!("{n:?}")).collect();
        assert_eq!(a, b, "same nodes in the same order");
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
