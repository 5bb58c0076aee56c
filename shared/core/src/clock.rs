//! The time the stores read: the system's, or in tests a clock that can be moved
//! forward, so TTL and lease expiry are tested by advancing time instead of sleeping.

use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Reads the wall clock (session timestamps, TTLs) and the monotonic clock (leases).
///
/// [`Clock::system`] (the default) is the real time. [`Clock::manual`] is the real
/// time plus whatever [`Clock::advance`] added: time still passes as usual (so the
/// order of events stays natural), and a test jumps over a TTL at once. Clones share
/// the advance.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// How far ahead of the real time this clock runs, in nanoseconds; `None` for the
    /// system clock, which cannot be advanced.
    ahead_nanos: Option<Arc<AtomicU64>>,
}

impl Clock {
    /// The real time.
    pub fn system() -> Clock {
        Clock::default()
    }

    /// A clock tests move forward with [`Clock::advance`].
    pub fn manual() -> Clock {
        Clock {
            ahead_nanos: Some(Arc::default()),
        }
    }

    /// Whether [`Clock::advance`] moves this clock (false for the system clock).
    pub fn is_manual(&self) -> bool {
        self.ahead_nanos.is_some()
    }

    /// Moves a manual clock forward by `by`.
    ///
    /// # Panics
    /// On the system clock: a test that means to jump over a TTL must not silently
    /// wait for nothing.
    pub fn advance(&self, by: Duration) {
        let ahead = self
            .ahead_nanos
            .as_ref()
            .expect("only a Clock::manual() can be advanced");
        let nanos = u64::try_from(by.as_nanos()).expect("an advance of less than 584 years");
        ahead.fetch_add(nanos, Ordering::Relaxed);
    }

    fn ahead(&self) -> Duration {
        self.ahead_nanos.as_ref().map_or(Duration::ZERO, |ahead| {
            Duration::from_nanos(ahead.load(Ordering::Relaxed))
        })
    }

    /// The wall-clock time.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + self.ahead()
    }

    /// The monotonic time.
    pub fn instant(&self) -> Instant {
        Instant::now() + self.ahead()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_runs_ahead_by_what_was_advanced_and_clones_share_it() {
        let clock = Clock::manual();
        let copy = clock.clone();
        let (wall, mono) = (Utc::now(), Instant::now());
        clock.advance(Duration::from_secs(3600));
        assert!(copy.now() >= wall + Duration::from_secs(3600));
        assert!(copy.instant() >= mono + Duration::from_secs(3600));
        assert!(copy.now() < wall + Duration::from_secs(3660), "and no further");
    }

    #[test]
    #[should_panic(expected = "only a Clock::manual() can be advanced")]
    fn the_system_clock_cannot_be_advanced() {
        Clock::system().advance(Duration::from_secs(1));
    }
}
