//! Positions in one of a snapshot's lists found by a uid, without copying the uids: a sorted list
//! of (hash of the uid, position). A lookup compares the uids themselves, so two uids that share
//! a hash are told apart; the index only narrows the search.

use std::hash::Hasher;

/// Positions by the hash of a uid, sorted by hash, then position.
#[derive(Debug)]
pub(super) struct UidIndex {
    sorted: Vec<(u64, u32)>,
    hash: fn(&str) -> u64,
}

fn hash(uid: &str) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(uid.as_bytes());
    h.finish()
}

impl UidIndex {
    /// Indexes `(uid, position)` pairs.
    pub(super) fn new<'a>(keys: impl Iterator<Item = (&'a str, usize)>) -> Self {
        Self::with_hash(keys, hash)
    }

    fn with_hash<'a>(keys: impl Iterator<Item = (&'a str, usize)>, hash: fn(&str) -> u64) -> Self {
        let mut v: Vec<(u64, u32)> = keys
            .filter_map(|(uid, at)| Some((hash(uid), u32::try_from(at).ok()?)))
            .collect();
        v.sort_unstable();
        UidIndex { sorted: v, hash }
    }

    /// The positions indexed under `uid`'s hash, ascending. The caller checks each position's
    /// uid: positions of other uids with the same hash are among them.
    fn candidates(&self, uid: &str) -> impl Iterator<Item = usize> + '_ {
        let h = (self.hash)(uid);
        let start = self.sorted.partition_point(|&(x, _)| x < h);
        self.sorted[start..]
            .iter()
            .take_while(move |&&(x, _)| x == h)
            .map(|&(_, at)| at as usize)
    }

    /// The positions whose uid, as `uid_at` reads it, is `uid`, ascending.
    pub(super) fn find<'a, 'b>(
        &'a self,
        uid: &'a str,
        uid_at: impl Fn(usize) -> Option<&'b str> + 'a,
    ) -> impl Iterator<Item = usize> + 'a {
        self.candidates(uid)
            .filter(move |&at| uid_at(at) == Some(uid))
    }

    /// The last position whose uid is `uid` (a map built from the list in order keeps the last
    /// of equal keys, and so does this).
    pub(super) fn last<'b>(
        &self,
        uid: &str,
        uid_at: impl Fn(usize) -> Option<&'b str>,
    ) -> Option<usize> {
        self.find(uid, uid_at).last()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UIDS: [&str; 5] = ["a", "b", "c", "b", "d"];

    fn at(i: usize) -> Option<&'static str> {
        UIDS.get(i).copied()
    }

    #[test]
    fn finds_every_position_of_a_uid_and_the_last_as_a_map_would() {
        let index = UidIndex::new(UIDS.iter().copied().zip(0..));
        assert_eq!(index.find("b", at).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(index.last("b", at), Some(3));
        assert_eq!(index.last("d", at), Some(4));
        assert_eq!(index.last("e", at), None);
    }

    #[test]
    fn uids_sharing_a_hash_are_told_apart() {
        let index = UidIndex::with_hash(UIDS.iter().copied().zip(0..), |_| 7);
        assert_eq!(index.candidates("e").count(), UIDS.len());
        let find = |uid: &'static str| -> Vec<usize> { index.find(uid, at).collect() };
        assert_eq!(find("a"), [0]);
        assert_eq!(find("b"), [1, 3]);
        assert_eq!(find("d"), [4]);
        assert!(find("e").is_empty());
    }
}
