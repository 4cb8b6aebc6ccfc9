//! What the detector's and the episodes' live sinks share: the hand-off of their results
//! to readers, and their owner's control.
//!
//! Each runs a state machine on the follower's thread; its results wait in a [`Handoff`]
//! and move to the readers' store under a `try_lock`; its owner holds a [`SinkControl`].

use std::sync::{Arc, Mutex, MutexGuard};

use crate::busy::CpuTimes;
use crate::follower::{FollowError, FrameSink, Subscription};
use lrbc::attach::Attached;
use lrbc::sync::lock;

/// Results waiting for the store's lock before the follower waits for it.
pub(crate) const PENDING_MAX: usize = 100_000;

/// A sink's results on their way to the store its readers lock (on the follower's
/// thread).
pub(crate) struct Handoff<T, S> {
    store: Arc<Mutex<S>>,
    pending: Vec<T>,
}

impl<T, S> Handoff<T, S> {
    pub(crate) fn new(store: Arc<Mutex<S>>) -> Self {
        Self {
            store,
            pending: Vec::new(),
        }
    }

    /// What waits for the store: the state machine adds to it.
    pub(crate) fn pending(&mut self) -> &mut Vec<T> {
        &mut self.pending
    }

    /// The store, locked, and what waits for it, taken out: when its lock is free
    /// (readers never make the follower wait), or when [`PENDING_MAX`] results have
    /// piled up, or when `wait`. None: the lock is busy; they wait for the next flush.
    pub(crate) fn take(
        &mut self,
        wait: bool,
    ) -> Option<(MutexGuard<'_, S>, std::vec::Drain<'_, T>)> {
        let guard = match self.store.try_lock() {
            Ok(g) => g,
            Err(_) if !wait && self.pending.len() < PENDING_MAX => return None,
            Err(_) => lock(&self.store),
        };
        Some((guard, self.pending.drain(..)))
    }
}

/// The owner's side of such a sink: its place at the follower, and the budget on a busy
/// machine that the sink asks the follower for at each tick.
#[derive(Debug)]
pub(crate) struct SinkControl {
    busy_budget_percent: Arc<Mutex<Option<f32>>>,
    subscription: Option<Subscription>,
}

impl SinkControl {
    /// Adds `sink` to the follower of `attached`'s segment (the machine's load read by
    /// `read_load`); `busy_budget_percent` is the budget the sink reads at its ticks.
    pub(crate) fn subscribe(
        attached: &Attached,
        sink: Box<dyn FrameSink>,
        read_load: fn() -> Option<CpuTimes>,
        busy_budget_percent: Arc<Mutex<Option<f32>>>,
    ) -> Result<Self, FollowError> {
        let subscription = crate::follower::subscribe_with_load(attached, sink, read_load)?;
        Ok(Self {
            busy_budget_percent,
            subscription: Some(subscription),
        })
    }

    /// The owner's budget on a busy machine changed.
    pub(crate) fn set_busy_budget(&self, percent_of_a_core: Option<f32>) {
        *lock(&self.busy_budget_percent) = percent_of_a_core;
    }

    /// Whether the follower's thread ended (only a panic ends it early).
    pub(crate) fn thread_ended(&self) -> bool {
        self.subscription
            .as_ref()
            .is_none_or(Subscription::thread_ended)
    }

    /// Leaves the follower: the sink is dropped (and flushes what it holds).
    pub(crate) fn stop(&mut self) {
        self.subscription = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flush_leaves_the_results_waiting_while_a_reader_holds_the_store() {
        let store = Arc::new(Mutex::new(Vec::<u32>::new()));
        let mut handoff = Handoff::new(Arc::clone(&store));
        handoff.pending().extend([1, 2, 3]);
        {
            let _reader = lock(&store);
            assert!(handoff.take(false).is_none());
        }
        assert_eq!(handoff.pending().len(), 3);
        let Some((mut guard, pending)) = handoff.take(false) else {
            panic!("the store's lock is free");
        };
        guard.extend(pending);
        drop(guard);
        assert_eq!(*lock(&store), vec![1, 2, 3]);
        assert!(handoff.pending().is_empty());
    }
}
