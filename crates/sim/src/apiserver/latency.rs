//! How long the simulated API server takes to answer a list.
//!
//! kube-apiserver answers a list in time that grows with the objects it returns (it encodes and
//! sends each of them), and a client's concurrent lists of several kinds finish in an order
//! set by their sizes and the network: on a real cluster, the list of a few custom resources
//! usually completes well before the list of every pod. A simulated server that answers every
//! list at once hides races between a controller's caches; [`ListLatency`] brings that order
//! back. The objects are read when the list is served, then sent after the latency, so a slow
//! list shows the state at its start, as on a real server.

use std::time::Duration;

/// The time a list takes: `base` plus `per_object` for each object returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListLatency {
    /// Spent on every list, however short.
    pub base: Duration,
    /// Spent on each object returned.
    pub per_object: Duration,
}

impl ListLatency {
    /// No latency: every list is answered as soon as it is read.
    pub const NONE: Self = Self {
        base: Duration::ZERO,
        per_object: Duration::ZERO,
    };

    /// How long a list of `objects` objects takes.
    pub fn of(&self, objects: usize) -> Duration {
        let objects = u32::try_from(objects).unwrap_or(u32::MAX);
        self.base
            .saturating_add(self.per_object.saturating_mul(objects))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_takes_longer_the_more_objects_it_returns() {
        let latency = ListLatency {
            base: Duration::from_millis(5),
            per_object: Duration::from_millis(2),
        };
        assert_eq!(latency.of(0), Duration::from_millis(5));
        assert_eq!(latency.of(10), Duration::from_millis(25));
        assert_eq!(ListLatency::NONE.of(1_000), Duration::ZERO);
    }
}
