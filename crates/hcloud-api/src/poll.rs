//! How the action waiter polls (a setting of the [`Client`](crate::Client), used by the waiter).

use std::time::Duration;

/// How the action waiter polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollPolicy {
    /// First poll interval.
    pub initial: Duration,
    /// Largest poll interval; the interval grows by 1.5x per poll up to this.
    pub max: Duration,
}

impl Default for PollPolicy {
    fn default() -> Self {
        PollPolicy { initial: Duration::from_millis(250), max: Duration::from_secs(2) }
    }
}
