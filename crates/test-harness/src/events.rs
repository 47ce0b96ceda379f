//! Reading the Events recorded about an object, whichever Events API the controller used.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event as EventsV1Event;
use kube::api::ListParams;
use kube::{Api, Client};

use crate::error::HarnessError;

/// Which API an event was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventApi {
    /// `core/v1` `Event` (`involvedObject`, `message`).
    CoreV1,
    /// `events.k8s.io/v1` `Event` (`regarding`, `note`).
    EventsV1,
}

/// One event about an object, reduced to what tests assert on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedEvent {
    /// `Normal` or `Warning`.
    pub type_: String,
    /// The machine-readable reason, e.g. `Synced`.
    pub reason: String,
    /// The human-readable message (`note` in `events.k8s.io/v1`).
    pub message: String,
    /// The namespace the Event object lives in (`default` for cluster-scoped objects).
    pub namespace: String,
    /// How many times it occurred (1 without aggregation).
    pub count: i32,
    /// Where it was read from.
    pub api: EventApi,
}

impl fmt::Display for ObservedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} (x{}, ns {}): {}", self.type_, self.reason, self.count, self.namespace, self.message)
    }
}

/// All events about the object of kind `kind` (e.g. `"Node"`, `"Service"`) called `name`, in
/// any namespace, read from both `core/v1` and `events.k8s.io/v1`.
///
/// The two APIs are views of the same storage on a real API server, so an event normally
/// appears in both; duplicates are removed by the Event's UID (the `core/v1` view is kept).
/// Events about a Node are written in namespace `default` (where kube-runtime's `Recorder` and
/// client-go put them); listing all namespaces finds them wherever a writer put them.
pub async fn events_for(client: &Client, kind: &str, name: &str) -> Result<Vec<ObservedEvent>, HarnessError> {
    let mut seen = BTreeSet::new();
    let mut events = Vec::new();

    let core: Api<CoreEvent> = Api::all(client.clone());
    let params = ListParams::default().fields(&format!("involvedObject.kind={kind},involvedObject.name={name}"));
    let list = core
        .list(&params)
        .await
        .map_err(|e| HarnessError::kube(format!("listing core/v1 events for {kind} {name}"), e))?;
    for event in list.items {
        if event.involved_object.kind.as_deref() != Some(kind) || event.involved_object.name.as_deref() != Some(name) {
            continue;
        }
        if let Some(uid) = event.metadata.uid.clone() {
            seen.insert(uid);
        }
        events.push(ObservedEvent {
            type_: event.type_.unwrap_or_default(),
            reason: event.reason.unwrap_or_default(),
            message: event.message.unwrap_or_default(),
            namespace: event.metadata.namespace.unwrap_or_default(),
            count: event.series.and_then(|s| s.count).or(event.count).unwrap_or(1),
            api: EventApi::CoreV1,
        });
    }

    let v1: Api<EventsV1Event> = Api::all(client.clone());
    let params = ListParams::default().fields(&format!("regarding.name={name}"));
    let list = v1
        .list(&params)
        .await
        .map_err(|e| HarnessError::kube(format!("listing events.k8s.io/v1 events for {kind} {name}"), e))?;
    for event in list.items {
        let regarding = event.regarding.unwrap_or_default();
        if regarding.kind.as_deref() != Some(kind) || regarding.name.as_deref() != Some(name) {
            continue;
        }
        if event.metadata.uid.as_ref().is_some_and(|uid| seen.contains(uid)) {
            continue;
        }
        events.push(ObservedEvent {
            type_: event.type_.unwrap_or_default(),
            reason: event.reason.unwrap_or_default(),
            message: event.note.unwrap_or_default(),
            namespace: event.metadata.namespace.unwrap_or_default(),
            count: event.series.map(|s| s.count).or(event.deprecated_count).unwrap_or(1),
            api: EventApi::EventsV1,
        });
    }
    Ok(events)
}

/// Wait until an event with `reason` about `kind`/`name` exists and return it. On timeout the
/// error lists every event that was seen about the object.
pub async fn wait_for_event(
    client: &Client,
    kind: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Result<ObservedEvent, HarnessError> {
    let description = format!("an event with reason {reason:?} about {kind} {name}");
    let mut last: Result<Vec<ObservedEvent>, String> = Ok(Vec::new());
    let found =
        crate::wait::wait_for_value(timeout, &description, async || match events_for(client, kind, name).await {
            Ok(events) => {
                let hit = events.iter().find(|e| e.reason == reason).cloned();
                last = Ok(events);
                hit
            }
            Err(e) => {
                last = Err(e.to_string());
                None
            }
        })
        .await;
    found.map_err(|_| HarnessError::Timeout {
        description,
        timeout,
        last_state: match last {
            Ok(events) if events.is_empty() => "no events about the object".to_owned(),
            Ok(events) => {
                let lines: Vec<String> = events.iter().map(|e| format!("  {e}")).collect();
                format!("events about the object:\n{}", lines.join("\n"))
            }
            Err(e) => format!("last error listing events: {e}"),
        },
    })
}
