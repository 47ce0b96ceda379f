//! The client against the API's failure modes, over HTTP against `hcloud-fake`: rate limits
//! and their headers, the overall deadline, lost answers of creates and deletes, failed action
//! polls, and the retry rules of the official clients.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::*;
use hcloud_api::models::UpdateLoadBalancerRequest;
use hcloud_api::{Error, ErrorCode, RetryPolicy};
use hcloud_fake::control::{SeedLoadBalancer, SeedServer};
use hcloud_fake::{FakeConfig, FaultRule};
use pretty_assertions::assert_eq;

// ------------------------------------------------------------------------------------------
// 429 and the rate-limit headers
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_429_is_retried_for_a_post_waiting_as_the_rate_limit_headers_say() {
    // One request per second. Exponential backoff alone (10, 20, 40 ms) would use up the
    // three retries long before the bucket holds a request again; the headers say to wait
    // about a second.
    let policy =
        RetryPolicy { max_retries: 3, base_delay: Duration::from_millis(10), max_delay: Duration::from_secs(5) };
    let env = Env::with(FakeConfig::default().with_action_delay(SHORT_ACTION).with_rate_limit(1, 1.0), |b| {
        b.retry_policy(policy)
    })
    .await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    env.client.locations().list_all().await.unwrap();
    assert_eq!(env.client.rate_limit().map(|r| r.remaining), Some(0), "the bucket is empty");

    let action = env.client.servers().poweroff(sid(server)).await.unwrap();
    assert_eq!(action.command, "stop_server");
    let statuses = env.statuses("POST /v1/servers/{id}/actions/poweroff");
    let (last, refused) = statuses.split_last().unwrap();
    assert_eq!(*last, 201, "{statuses:?}");
    assert!(!refused.is_empty() && refused.iter().all(|s| *s == 429), "{statuses:?}");
    assert!(statuses.len() <= 4, "within max_retries: {statuses:?}");
    assert_eq!(env.h.snapshot().actions.len(), 1, "the power-off ran once");
}

#[tokio::test]
async fn a_429_whose_wait_would_pass_the_deadline_is_not_retried() {
    // No refill: the headers say the bucket is full again in a year, far beyond the deadline.
    let policy =
        RetryPolicy { max_retries: 3, base_delay: Duration::from_millis(10), max_delay: Duration::from_secs(60) };
    let env = Env::with(FakeConfig::default().with_rate_limit(1, 0.0), |b| {
        b.retry_policy(policy).deadline(Duration::from_secs(5))
    })
    .await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    env.client.locations().list_all().await.unwrap();

    let err = env.client.servers().get(sid(server)).await.unwrap_err();
    assert!(err.is_rate_limited(), "{err:?}");
    assert_eq!(api_err(&err).status, 429);
    assert_eq!(env.count("GET /v1/servers/{id}"), 1, "no attempt that could only be refused again");
}

// ------------------------------------------------------------------------------------------
// The overall deadline
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_call_ends_at_its_overall_deadline() {
    // Retry delays of 1 ms: an attempt that ends within a delay of the deadline ends the call
    // with its own error instead (documented: "DeadlineExceeded or its last error"), which 40 ms
    // delays made a matter of the machine's load (seen at load 18). With 1 ms, the last attempt
    // is the one the deadline cuts short.
    let policy =
        RetryPolicy { max_retries: 50, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(1) };
    let env = Env::with(FakeConfig::default(), |b| {
        b.retry_policy(policy).timeout(Duration::from_millis(300)).deadline(Duration::from_secs(1))
    })
    .await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    env.h.inject_fault(FaultRule::latency(Some("GET"), "/servers/{id}", Duration::from_secs(3)).times(0));

    let err = env.client.servers().get(sid(server)).await.unwrap_err();
    match &err {
        Error::DeadlineExceeded { request, after, last } => {
            assert_eq!(request, &format!("GET /servers/{server}"));
            assert_eq!(*after, Duration::from_secs(1));
            assert!(matches!(last.as_deref(), Some(Error::Timeout { .. })), "{last:?}");
        }
        other => panic!("expected DeadlineExceeded, got {other:?}"),
    }
    assert!(err.is_transient());
    assert!(err.to_string().contains("deadline"), "{err}");
    let attempts = env.rec.take();
    assert!((2..=5).contains(&attempts.len()), "a few 300 ms attempts fit into 1 s, not 51: {attempts:?}");
    assert!(attempts.iter().all(|a| a.3.is_none()), "every attempt timed out: {attempts:?}");
}

// ------------------------------------------------------------------------------------------
// Action waits survive a failed poll
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn one_failed_poll_does_not_end_an_action_wait() {
    let env = Env::start(FakeConfig::default().with_action_delay(FOREVER)).await;
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    let action = env.client.servers().poweroff(sid(server)).await.unwrap();
    // One whole poll fails: the first attempt and its three retries.
    env.h.inject_fault(FaultRule::error(Some("GET"), "/actions", 503, "unavailable").times(4));

    let client = env.client.clone();
    let waiting = action.clone();
    let task = tokio::spawn(async move { client.wait_for_action(&waiting, WAIT).await });
    let h = env.h.clone();
    until("the failed poll and one more", || h.faults().is_empty() && h.request_count("GET /v1/actions") >= 5).await;
    assert!(!task.is_finished(), "the waiter keeps waiting after a failed poll");
    env.h.finish_all_actions();
    let done = task.await.unwrap().unwrap();
    assert_eq!((done.id, done.status), (action.id, hcloud_api::models::ActionStatus::Success));
    let statuses = env.statuses("GET /v1/actions");
    assert_eq!(&statuses[..5], [503, 503, 503, 503, 200]);
    assert_eq!(statuses.last(), Some(&200));
}

#[tokio::test]
async fn an_action_pruned_before_the_next_poll_ends_the_wait_as_gone() {
    let env = Env::start(FakeConfig::default().with_action_delay(FOREVER)).await;
    env.h.set_action_retention(Duration::ZERO);
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();
    let action = env.client.servers().poweroff(sid(server)).await.unwrap();

    let client = env.client.clone();
    let waiting = action.clone();
    let task = tokio::spawn(async move { client.wait_for_action(&waiting, WAIT).await });
    let h = env.h.clone();
    until("the waiter polled", || h.request_count("GET /v1/actions") >= 1).await;
    // It finishes and, with no retention, is forgotten before the next poll.
    env.h.finish_all_actions();
    let err = task.await.unwrap().unwrap_err();
    match &err {
        Error::ActionGone { id, command } => assert_eq!((*id, command.as_str()), (action.id, "stop_server")),
        other => panic!("expected ActionGone, got {other:?}"),
    }
    assert!(err.is_transient() && err.to_string().contains("outcome is unknown"), "{err}");
    // The resource tells what happened.
    assert_eq!(env.client.servers().get(sid(server)).await.unwrap().status.as_str(), "off");
}

// ------------------------------------------------------------------------------------------
// The official clients' retry rules: bad_gateway and timeout
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn bad_gateway_and_timeout_are_retried_for_idempotent_methods() {
    let env = Env::start(FakeConfig::default()).await;
    let lb = lbid(env.h.seed_load_balancer(&SeedLoadBalancer::new("lb")).unwrap());
    let server = env.h.seed_server(&SeedServer::new("node-1")).unwrap();

    env.h.inject_fault(FaultRule::error(Some("PUT"), "/load_balancers/{id}", 502, "bad_gateway"));
    let rename = UpdateLoadBalancerRequest { name: Some("renamed".to_owned()), labels: None };
    assert_eq!(env.client.load_balancers().update(lb, &rename).await.unwrap().name, "renamed");
    assert_eq!(env.statuses("PUT /v1/load_balancers/{id}"), [502, 200]);

    // The code decides, as in hcloud-go, whatever the status.
    env.h.inject_fault(FaultRule::error(Some("GET"), "/servers/{id}", 500, "bad_gateway"));
    env.h.inject_fault(FaultRule::error(Some("GET"), "/servers/{id}", 500, "timeout"));
    assert_eq!(env.client.servers().get(sid(server)).await.unwrap().name, "node-1");
    assert_eq!(env.statuses("GET /v1/servers/{id}"), [500, 500, 200]);

    env.h.inject_fault(FaultRule::error(Some("DELETE"), "/load_balancers/{id}", 504, "timeout"));
    env.client.load_balancers().delete(lb).await.unwrap();
    assert_eq!(env.statuses("DELETE /v1/load_balancers/{id}").len(), 2);
    assert!(env.h.snapshot().load_balancers.is_empty());

    // A plain server_error is not retried, and neither is a POST that may have been applied.
    env.h.inject_fault(FaultRule::error(Some("GET"), "/servers/{id}", 500, "server_error"));
    let err = env.client.servers().get(sid(server)).await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::ServerError));
    env.h.inject_fault(FaultRule::error(Some("POST"), "/servers/{id}/actions/poweron", 502, "bad_gateway"));
    let err = env.client.servers().poweron(sid(server)).await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::BadGateway));
    assert_eq!(env.count("POST /v1/servers/{id}/actions/poweron"), 1);
}
