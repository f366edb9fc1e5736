//! A streaming list's objects on their way into the [`ClusterState`]: event lines read into one
//! buffer per batch, converted in batches on blocking threads, put into the state in order.

use std::ops::Range;
use std::sync::Arc;

use futures::{AsyncBufRead, AsyncBufReadExt};

use crate::cluster::kinds::{self, Kind};
use crate::cluster::state::ClusterState;

/// Objects per batch (a page's worth).
const BATCH: usize = 500;

/// Bytes reserved for a batch's lines up front: 500 pods as kube-apiserver writes them take
/// about 600 KB, so a batch of pods never grows its buffer (larger objects grow it a few times).
const TEXT_CAPACITY: usize = 1 << 20;

/// Where the object is in an ADDED event line written as kube-apiserver writes it
/// (`{"type":"ADDED","object":{…}}`), found without parsing the line: the object is parsed once,
/// by its converter (which rejects it if it is not valid JSON). None for any other line.
fn added_object(line: &str) -> Option<Range<usize>> {
    const HEAD: &str = r#"{"type":"ADDED","object":{"#;
    let line = line.trim_end();
    (line.starts_with(HEAD) && line.ends_with("}}")).then(|| HEAD.len() - 1..line.len() - 1)
}

/// How many batches convert at once: one per core (at least two: reading the stream takes
/// a thread too, but waits most of the time), at most four.
fn in_flight() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4))
}

/// Listed objects waiting to be converted: their event lines, read one after the other into
/// one buffer (no allocation per line), and where each object is in it. A full batch is
/// converted on a blocking thread of its own while the stream goes on being read, by a builder
/// of its own, so batches convert in parallel (up to [`in_flight`] at a time); each then waits
/// for the batch before it to be in the state and puts its objects in (in order, one lock per
/// batch). The state takes over what the batch's builder shares between objects.
pub(super) struct Batch {
    /// The lines read since the last flush.
    text: String,
    /// Where each waiting object is in `text`.
    objects: Vec<Range<usize>>,
    /// The batches handed over and not yet known to be in the state, oldest first.
    converting: std::collections::VecDeque<tokio::task::JoinHandle<()>>,
    /// Signalled (or dropped) once the last batch handed over is in the state.
    last_in: Option<std::sync::mpsc::Receiver<()>>,
    /// How many batches may convert at once ([`in_flight`]).
    in_flight: usize,
    /// Buffers of converted batches, cleared, for the next batches: reused memory is already
    /// resident, a fresh megabyte is faulted in page by page.
    spare: Arc<std::sync::Mutex<Vec<String>>>,
}

/// The line [`Batch::read_line`] read last.
pub(super) enum Line {
    /// The stream ended.
    End,
    /// Only whitespace.
    Blank,
    /// An ADDED event as kube-apiserver writes it, kept in the batch (only while listing).
    Added,
    /// Any other line, taken out of the batch.
    Other(String),
}

impl Batch {
    pub(super) fn new() -> Self {
        Batch {
            text: String::new(),
            objects: Vec::with_capacity(BATCH),
            converting: Default::default(),
            last_in: None,
            in_flight: in_flight(),
            spare: Default::default(),
        }
    }

    /// Reads the next line of `body`. While `listing`, an ADDED event written as
    /// kube-apiserver writes it stays in the batch ([`Line::Added`]).
    pub(super) async fn read_line<R: AsyncBufRead + Unpin>(
        &mut self,
        body: &mut R,
        listing: bool,
    ) -> std::io::Result<Line> {
        if listing && self.text.capacity() == 0 {
            let spare = self.spare.lock().ok().and_then(|mut s| s.pop());
            self.text = spare.unwrap_or_else(|| String::with_capacity(TEXT_CAPACITY));
        }
        let start = self.text.len();
        if body.read_line(&mut self.text).await? == 0 {
            return Ok(Line::End);
        }
        let line = &self.text[start..];
        if line.trim().is_empty() {
            self.text.truncate(start);
            return Ok(Line::Blank);
        }
        if listing && let Some(object) = added_object(line) {
            self.objects.push(start + object.start..start + object.end);
            return Ok(Line::Added);
        }
        Ok(Line::Other(if start == 0 {
            std::mem::take(&mut self.text)
        } else {
            self.text.split_off(start)
        }))
    }

    /// Keeps the object at `object` in `line` (an ADDED event written in another form).
    pub(super) fn push(&mut self, line: &str, object: Range<usize>) {
        let start = self.text.len();
        self.text.push_str(line);
        self.objects.push(start + object.start..start + object.end);
    }

    /// Whether the batch is full (then it should be flushed).
    pub(super) fn is_full(&self) -> bool {
        self.objects.len() >= BATCH
    }

    /// Starts converting the waiting objects; waits while too many batches are in flight.
    pub(super) async fn flush(&mut self, kind: Kind, state: &Arc<ClusterState>) {
        if self.objects.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.text);
        let objects = std::mem::replace(&mut self.objects, Vec::with_capacity(BATCH));
        let state = Arc::clone(state);
        let before = self.last_in.take();
        let (done, last_in) = std::sync::mpsc::sync_channel(1);
        self.last_in = Some(last_in);
        let spare = Arc::clone(&self.spare);
        let keep = self.in_flight + 1;
        self.converting
            .push_back(tokio::task::spawn_blocking(move || {
                let batch = kinds::ConvertedBatch::convert(
                    kind,
                    objects.iter().filter_map(|r| text.get(r.clone())),
                );
                let mut text = text;
                text.clear();
                if let Ok(mut spare) = spare.lock()
                    && spare.len() < keep
                {
                    spare.push(text);
                }
                // In order: after the batch before is in (or its thread ended: then its panic
                // reaches the reader through its handle).
                if let Some(before) = before {
                    let _ = before.recv();
                }
                state.upsert_converted(batch);
                let _ = done.send(());
            }));
        while self.converting.len() > self.in_flight {
            self.settle_oldest().await;
        }
    }

    async fn settle_oldest(&mut self) {
        if let Some(running) = self.converting.pop_front()
            && let Err(e) = running.await
            && e.is_panic()
        {
            std::panic::resume_unwind(e.into_panic());
        }
    }

    /// Waits until every batch handed over is in the state.
    pub(super) async fn settle(&mut self) {
        while !self.converting.is_empty() {
            self.settle_oldest().await;
        }
        self.last_in = None;
    }

    /// Converts everything waiting and waits for it: the state then holds every object read.
    pub(super) async fn finish(&mut self, kind: Kind, state: &Arc<ClusterState>) {
        self.flush(kind, state).await;
        self.settle().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_object_is_found_only_in_added_lines_as_kube_apiserver_writes_them() {
        let line = r#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#;
        let r = added_object(line).unwrap();
        assert_eq!(&line[r], r#"{"metadata":{"name":"a"}}"#);
        let crlf = format!("{line}\r\n");
        assert_eq!(
            &crlf[added_object(&crlf).unwrap()],
            r#"{"metadata":{"name":"a"}}"#
        );
        for other in [
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"a"}}}"#,
            r#"{"object":{"metadata":{"name":"a"}},"type":"ADDED"}"#,
            r#"{"type":"ADDED","object":{"metadata":{"name":"a"}},"x":1}"#,
            r#"{"type":"BOOKMARK","object":{"metadata":{}}}"#,
        ] {
            assert_eq!(added_object(other), None, "{other}");
        }
    }

    fn object_texts(batch: &Batch) -> Vec<&str> {
        batch
            .objects
            .iter()
            .map(|r| &batch.text[r.clone()])
            .collect()
    }

    #[tokio::test]
    async fn lines_are_read_into_one_buffer_and_only_listed_added_objects_stay() {
        let stream = concat!(
            "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n",
            "  \n",
            "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\r\n",
            "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{}}}\n",
            "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"c\"}}}"
        );
        let mut body = futures::io::Cursor::new(stream.as_bytes().to_vec());
        let mut batch = Batch::new();
        let mut kinds = Vec::new();
        loop {
            match batch.read_line(&mut body, true).await.unwrap() {
                Line::End => break,
                Line::Blank => kinds.push("blank".to_string()),
                Line::Added => kinds.push("added".to_string()),
                Line::Other(l) => kinds.push(l.trim_end().to_string()),
            }
        }
        assert_eq!(
            kinds,
            [
                "added",
                "blank",
                "added",
                r#"{"type":"BOOKMARK","object":{"metadata":{}}}"#,
                "added"
            ]
        );
        assert_eq!(
            object_texts(&batch),
            [
                r#"{"metadata":{"name":"a"}}"#,
                r#"{"metadata":{"name":"b"}}"#,
                r#"{"metadata":{"name":"c"}}"#
            ]
        );
        // An ADDED event in another form is kept where it is in its own line.
        let other = r#"{"object":{"metadata":{"name":"d"}},"type":"ADDED"}"#;
        batch.push(other, 10..35);
        assert_eq!(object_texts(&batch)[3], r#"{"metadata":{"name":"d"}}"#);
    }

    #[tokio::test]
    async fn a_watch_keeps_no_line_in_the_batch() {
        let stream = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n";
        let mut body = futures::io::Cursor::new(stream.as_bytes().to_vec());
        let mut batch = Batch::new();
        match batch.read_line(&mut body, false).await.unwrap() {
            Line::Other(l) => assert_eq!(l, stream),
            _ => panic!("a watch's ADDED event is handled on its own"),
        }
        assert!(batch.objects.is_empty() && batch.text.is_empty());
        assert!(matches!(
            batch.read_line(&mut body, false).await.unwrap(),
            Line::End
        ));
    }
}
