//! Request counters and the request log of `/v1`.

use std::collections::{BTreeMap, VecDeque};

use crate::control::{RequestCounts, RequestRecord};

/// Most log entries kept; older ones are dropped first.
pub const LOG_CAPACITY: usize = 100_000;

/// Counters and log.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    total: u64,
    counts: BTreeMap<String, u64>,
    log: VecDeque<RequestRecord>,
}

impl Metrics {
    /// Records one request.
    pub fn record(&mut self, record: RequestRecord) {
        self.total += 1;
        *self.counts.entry(record.endpoint.clone()).or_insert(0) += 1;
        if self.log.len() >= LOG_CAPACITY {
            self.log.pop_front();
        }
        self.log.push_back(record);
    }

    /// The counters.
    pub fn counts(&self) -> RequestCounts {
        RequestCounts { total: self.total, by_endpoint: self.counts.clone() }
    }

    /// The log, oldest first.
    pub fn log(&self) -> Vec<RequestRecord> {
        self.log.iter().cloned().collect()
    }

    /// The log entries matching `keep`, oldest first.
    pub fn log_where(&self, keep: impl Fn(&RequestRecord) -> bool) -> Vec<RequestRecord> {
        self.log.iter().filter(|r| keep(r)).cloned().collect()
    }

    /// Clears counters and log.
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}
