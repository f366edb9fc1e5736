//! [`SharedList`]: a list that snapshots share with the long-lived cluster state `run` keeps, so
//! taking a snapshot copies one pointer instead of one entry per pod.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A `Vec` shared between owners, copied on the first write by one of them (copy on write).
///
/// Reads go through `Deref` to the `Vec` (indexing, `iter`, `len`, slices); writes through
/// `DerefMut` copy the list first when another owner still holds it, so nobody ever sees
/// another owner's change.
#[derive(Debug)]
pub struct SharedList<T>(Arc<Vec<T>>);

impl<T> SharedList<T> {
    /// Whether `a` and `b` are the same list (not copies of each other).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// Whether no other owner holds this list (a write will not copy it).
    pub fn is_unique(&mut self) -> bool {
        Arc::get_mut(&mut self.0).is_some()
    }
}

impl<T> Clone for SharedList<T> {
    /// Another owner of the same list (no entry is copied).
    fn clone(&self) -> Self {
        SharedList(Arc::clone(&self.0))
    }
}

impl<T> Default for SharedList<T> {
    fn default() -> Self {
        SharedList(Arc::new(Vec::new()))
    }
}

impl<T> Deref for SharedList<T> {
    type Target = Vec<T>;

    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T: Clone> DerefMut for SharedList<T> {
    /// The list for writing, copied first if another owner holds it.
    fn deref_mut(&mut self) -> &mut Vec<T> {
        Arc::make_mut(&mut self.0)
    }
}

impl<T> From<Vec<T>> for SharedList<T> {
    fn from(v: Vec<T>) -> Self {
        SharedList(Arc::new(v))
    }
}

impl<T> FromIterator<T> for SharedList<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        SharedList(Arc::new(iter.into_iter().collect()))
    }
}

impl<'a, T> IntoIterator for &'a SharedList<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_copies_a_list_another_owner_holds_and_only_then() {
        let mut a = SharedList::from(vec![1, 2, 3]);
        let b = a.clone();
        assert!(SharedList::ptr_eq(&a, &b));
        a.push(4);
        assert!(!SharedList::ptr_eq(&a, &b));
        assert_eq!(*b, [1, 2, 3], "the other owner keeps what it had");
        assert_eq!(*a, [1, 2, 3, 4]);
        assert!(a.is_unique());
        let before = a.as_ptr();
        a[0] = 9;
        assert_eq!(
            a.as_ptr(),
            before,
            "a list nobody else holds is written in place"
        );
        assert_eq!((&a).into_iter().sum::<i32>(), 18);
    }
}
