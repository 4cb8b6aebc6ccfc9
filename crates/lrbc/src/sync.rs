//! The one lock helper: shared state here is plain values, so a panic in another holder
//! leaves it usable, and a poisoned lock is taken as it is rather than spreading the
//! panic to every reader.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, poisoned or not.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
