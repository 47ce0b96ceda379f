//! Fault injection at a rate: the fake's faults hit "the next N matching requests", so one
//! fault at a time is armed for any `/v1` request whenever fewer than `percent` of the requests
//! so far were faulted, rotating through every fault mode the fake knows; every
//! `ACTION_EVERY`th turn an action fails instead.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hcloud_fake::control::ActionFailure;
use hcloud_fake::{FakeHandle, FaultRule};

const ANY: &str = "/**";
const ACTION_EVERY: u64 = 14;

/// The rotation: every answer the fake can give instead of the handler's.
fn modes() -> Vec<(&'static str, FaultRule)> {
    vec![
        ("500 server_error", FaultRule::error(None, ANY, 500, "server_error")),
        ("502 bad_gateway", FaultRule::error(None, ANY, 502, "bad_gateway")),
        ("503 service_error", FaultRule::error(None, ANY, 503, "service_error")),
        ("504 timeout", FaultRule::error(None, ANY, 504, "timeout")),
        ("html 502", FaultRule::html(None, ANY, 502)),
        ("html 503", FaultRule::html(None, ANY, 503)),
        ("429 rate_limit_exceeded", FaultRule::error(None, ANY, 429, "rate_limit_exceeded")),
        // Longer than the client's 15 s per-attempt timeout: the client gives up and the fake
        // drops the request unanswered (nothing applied; not in the fake's request log).
        ("client timeout (20 s latency)", FaultRule::latency(None, ANY, Duration::from_secs(20))),
        ("reset before response", FaultRule::reset(None, ANY)),
        ("reset mid-body (applied)", FaultRule::reset_mid_body(None, ANY)),
        ("409 conflict", FaultRule::conflict(None, ANY)),
        ("423 locked", FaultRule::locked(None, ANY)),
        ("html 500 after applying", FaultRule::html(None, ANY, 500).applied()),
    ]
}

/// Injected-fault tallies by mode (what was armed; the request log says what hit).
pub type Armed = BTreeMap<&'static str, u64>;

/// Runs until `stop`; returns what it armed.
pub async fn run(h: FakeHandle, percent: f64, stop: Arc<AtomicBool>) -> Armed {
    let modes = modes();
    let mut armed = Armed::new();
    let mut turn: u64 = 0;
    let mut injected: u64 = 0;
    let base = h.request_counts().total;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let total = h.request_counts().total - base;
        if !h.faults().is_empty() || (injected as f64) >= total as f64 * percent / 100.0 {
            continue;
        }
        injected += 1;
        turn += 1;
        if turn.is_multiple_of(ACTION_EVERY) {
            h.fail_next_actions(ActionFailure::new(1, None, "action_failed"));
            *armed.entry("action failed").or_insert(0) += 1;
        } else {
            let (name, rule) = &modes[(turn as usize) % modes.len()];
            h.inject_fault(rule.clone());
            *armed.entry(*name).or_insert(0) += 1;
        }
    }
    h.clear_faults();
    armed
}
