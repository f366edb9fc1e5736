//! Running independent parts of a plugin's analysis on several cores. Results come back in input
//! order, so a plugin's output is the same as a sequential run's.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::snapshot::{NodeId, Snapshot};

/// Below this much work (in the caller's weight units, e.g. pods) one thread is faster. Unit tests
/// use 1, so every plugin's table tests also run its parallel path; so does [`with_workers`].
const DEFAULT_MIN_PARALLEL_WEIGHT: usize = if cfg!(test) { 1 } else { 20_000 };

thread_local! {
    static WORKERS_OVERRIDE: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// The least work worth splitting over threads (see [`DEFAULT_MIN_PARALLEL_WEIGHT`]).
pub fn min_parallel_weight() -> usize {
    if WORKERS_OVERRIDE.with(|w| w.get()).is_some() {
        1
    } else {
        DEFAULT_MIN_PARALLEL_WEIGHT
    }
}

/// Threads to use: the machine's cores, at most 4.
pub fn workers() -> usize {
    if let Some(n) = WORKERS_OVERRIDE.with(|w| w.get()) {
        return n;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// Runs `f` with [`workers`] returning `n` and every split taken on this thread, for tests that
/// compare results across worker counts whatever the machine's cores.
#[doc(hidden)]
pub fn with_workers<R>(n: usize, f: impl FnOnce() -> R) -> R {
    let before = WORKERS_OVERRIDE.with(|w| w.replace(Some(n)));
    let result = f();
    WORKERS_OVERRIDE.with(|w| w.set(before));
    result
}

/// Chunks per worker: more chunks than threads, taken one at a time, so a worker slowed by
/// another process on its core (kube-apiserver, a sidecar) takes fewer of them instead of holding
/// up the whole call.
const CHUNKS_PER_WORKER: usize = 4;

/// [`map_chunks`] over `nodes`, each weighted by the pods on it, with the usual
/// [`min_parallel_weight`]: how the plugins read the pods of many nodes at once.
pub fn map_node_chunks<R, F>(snapshot: &Snapshot, nodes: &[NodeId], f: F) -> Vec<R>
where
    R: Send,
    F: Fn(&[NodeId]) -> R + Sync,
{
    let weight = |&n: &NodeId| snapshot.pods_on_node_upper_bound(n);
    map_chunks(nodes, weight, min_parallel_weight(), f)
}

/// Splits `items` into contiguous chunks of similar total `weight` (a few per worker), runs `f`
/// on each chunk — this thread and [`workers`]` - 1` scoped threads take the next chunk until none
/// is left — and returns the results in chunk order. With one worker or less than `min_weight`
/// in all, `f` runs once on all of `items` on this thread. A panic in `f` is re-raised here (as
/// a sequential run would panic).
pub fn map_chunks<T, R, W, F>(items: &[T], weight: W, min_weight: usize, f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    W: Fn(&T) -> usize,
    F: Fn(&[T]) -> R + Sync,
{
    let workers = workers();
    let total: usize = items.iter().map(&weight).sum();
    if workers <= 1 || total < min_weight || items.len() < 2 {
        return vec![f(items)];
    }
    let chunks = split_by_weight(items, &weight, total, workers * CHUNKS_PER_WORKER);
    let next = AtomicUsize::new(0);
    // Runs chunks until none is left; returns them with their index.
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(chunk) = chunks.get(i) else {
                return done;
            };
            done.push((i, f(chunk)));
        }
    };
    let mut results = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..workers.min(chunks.len()))
            .map(|_| scope.spawn(work))
            .collect();
        let mut results = work();
        for h in helpers {
            results.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        results
    });
    results.sort_unstable_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Contiguous chunks of `items`, at most `parts`, each close to `total / parts` in weight.
fn split_by_weight<'a, T>(
    items: &'a [T],
    weight: &impl Fn(&T) -> usize,
    total: usize,
    parts: usize,
) -> Vec<&'a [T]> {
    let target = total.div_ceil(parts).max(1);
    let mut chunks = Vec::with_capacity(parts);
    let (mut start, mut acc) = (0usize, 0usize);
    for (i, item) in items.iter().enumerate() {
        acc += weight(item);
        if acc >= target && chunks.len() + 1 < parts {
            chunks.push(&items[start..=i]);
            start = i + 1;
            acc = 0;
        }
    }
    if start < items.len() {
        chunks.push(&items[start..]);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_item_once_in_order_with_balanced_weight() {
        let items: Vec<usize> = (1..=100).collect();
        let chunks = split_by_weight(&items, &|&w| w, items.iter().sum(), 4);
        assert!(chunks.len() <= 4 && chunks.len() >= 2);
        let flat: Vec<usize> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(flat, items);
        let sums: Vec<usize> = chunks.iter().map(|c| c.iter().sum()).collect();
        let target = items.iter().sum::<usize>().div_ceil(4);
        assert!(
            sums[..sums.len() - 1]
                .iter()
                .all(|&s| s >= target && s < target + 100)
        );
        // One heavy item cannot be split: it gets a chunk of its own.
        let heavy = [1usize, 1000, 1, 1];
        let chunks = split_by_weight(&heavy, &|&w| w, 1003, 2);
        assert_eq!(chunks, vec![&heavy[..2], &heavy[2..]]);
    }

    #[test]
    fn results_come_back_in_input_order_and_small_inputs_stay_on_one_thread() {
        let items: Vec<u64> = (0..10_000).collect();
        let sums = map_chunks(&items, |_| 10, 1, |c: &[u64]| (c[0], c.iter().sum::<u64>()));
        assert_eq!(
            sums.iter().map(|s| s.1).sum::<u64>(),
            items.iter().sum::<u64>()
        );
        assert!(sums.windows(2).all(|w| w[0].0 < w[1].0), "chunk order");
        assert_eq!(sums[0].0, 0);
        let one = map_chunks(&items, |_| 1, usize::MAX, |c: &[u64]| c.len());
        assert_eq!(one, vec![10_000]);
    }

    #[test]
    fn a_worker_held_up_on_one_chunk_leaves_the_others_to_the_rest() {
        use std::time::{Duration, Instant};
        let items: Vec<usize> = (0..8).collect();
        let others_done = AtomicUsize::new(0);
        let results = with_workers(2, || {
            map_chunks(
                &items,
                |_| 1,
                1,
                |chunk: &[usize]| {
                    if chunk.contains(&0) {
                        // Held up (as by another process on its core) until every other chunk ran:
                        // with one chunk per worker this would wait for its own second half.
                        let deadline = Instant::now() + Duration::from_secs(10);
                        while others_done.load(Ordering::SeqCst) < 7 && Instant::now() < deadline {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        return (chunk.to_vec(), others_done.load(Ordering::SeqCst) == 7);
                    }
                    others_done.fetch_add(chunk.len(), Ordering::SeqCst);
                    (chunk.to_vec(), true)
                },
            )
        });
        assert!(results.len() > 2, "more chunks than workers: {results:?}");
        assert!(
            results.iter().all(|(_, ok)| *ok),
            "the other worker ran the rest: {results:?}"
        );
        let flat: Vec<usize> = results.into_iter().flat_map(|(c, _)| c).collect();
        assert_eq!(flat, items, "results in chunk order");
    }
}
