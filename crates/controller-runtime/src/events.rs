//! Kubernetes events for the objects controllers act on, written as core/v1 Events like
//! client-go's recorder (which upstream's controllers use), so `kubectl describe` shows them
//! on every API server version. (events.k8s.io/v1 rejects Node events in `default` on older
//! servers.) Repeats of the same event within ten minutes bump `count` and `lastTimestamp`
//! instead of creating new objects, like client-go's aggregation.
//!
//! Every event is also logged, so a misconfiguration shows up in `kubectl describe` and in
//! the CCM's logs. Publishing failures are logged, never propagated.
//!
//! Callers that must not wait for the API server (a cloud provider raising events from inside
//! its calls) go through an [`EventQueue`](queue::EventQueue): bounded like client-go's broadcaster (1,000 events,
//! the rest dropped and counted), repeats folded into one pending event, published one at a
//! time by a single task.

pub mod queue;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

/// How long repeats of an event are folded into one object.
const AGGREGATION_WINDOW: Duration = Duration::from_secs(600);

/// Event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something needs attention.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What makes two events repeats of each other (client-go's event logger compares the same
/// fields, minus the source, which is one recorder's).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    object: (Option<String>, Option<String>, Option<String>, Option<String>),
    type_: EventType,
    reason: String,
    note: String,
}

/// Longest note kept; longer ones are cut (the API server rejects messages over 1 KiB in
/// events.k8s.io and client-go truncates the same way).
const MAX_NOTE: usize = 1024;

impl Key {
    /// The key of an event; `note` must already be truncated.
    fn new(regarding: &ObjectReference, type_: EventType, reason: &str, note: &str) -> Self {
        Key {
            object: (
                regarding.kind.clone(),
                regarding.namespace.clone(),
                regarding.name.clone(),
                regarding.uid.clone(),
            ),
            type_,
            reason: reason.to_owned(),
            note: note.to_owned(),
        }
    }
}

struct Seen {
    namespace: String,
    name: String,
    count: i32,
    last: std::time::Instant,
}

/// Publishes events on behalf of one controller. Cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    client: Client,
    component: String,
    host: Option<String>,
    seen: Arc<Mutex<HashMap<Key, Seen>>>,
}

impl EventRecorder {
    /// A recorder reporting as `component` (e.g. `cloud-node-controller`).
    pub fn new(client: Client, component: &str) -> Self {
        EventRecorder { client, component: component.to_owned(), host: hostname(), seen: Arc::default() }
    }

    /// A Normal event.
    pub async fn normal(&self, regarding: &ObjectReference, reason: &str, note: String) {
        self.record(regarding, EventType::Normal, reason, note, 1).await;
    }

    /// A Warning event.
    pub async fn warning(&self, regarding: &ObjectReference, reason: &str, note: String) {
        self.record(regarding, EventType::Warning, reason, note, 1).await;
    }

    /// Logs and publishes an event that happened `occurrences` times (at least once).
    async fn record(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
        occurrences: i32,
    ) {
        let (component, object) = (&self.component, describe(regarding));
        match (type_, occurrences) {
            (EventType::Normal, 1) => info!(%component, %object, reason, "{note}"),
            (EventType::Normal, _) => info!(%component, %object, reason, occurrences, "{note}"),
            (EventType::Warning, 1) => warn!(%component, %object, reason, "{note}"),
            (EventType::Warning, _) => warn!(%component, %object, reason, occurrences, "{note}"),
        }
        self.publish(regarding, type_, reason, note, occurrences).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Seen>> {
        // Entries are inserted/updated whole; a poisoned map is still consistent.
        self.seen.lock_unpoisoned()
    }

    /// Creates the event with `count` `occurrences`, or adds them to the count of the same
    /// event published within [`AGGREGATION_WINDOW`].
    async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
        occurrences: i32,
    ) {
        let note = truncate(note, MAX_NOTE);
        let key = Key::new(regarding, type_, reason, &note);
        let now = Time(Timestamp::now());
        let repeat = {
            let mut seen = self.lock();
            seen.retain(|_, s| s.last.elapsed() < AGGREGATION_WINDOW);
            seen.get(&key).map(|s| (s.namespace.clone(), s.name.clone(), s.count.saturating_add(occurrences)))
        };
        if let Some((namespace, name, count)) = repeat {
            let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
            let patch = json!({ "count": count, "lastTimestamp": now });
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await {
                Ok(_) => {
                    if let Some(s) = self.lock().get_mut(&key) {
                        s.count = count;
                        s.last = std::time::Instant::now();
                    }
                    return;
                }
                Err(e) => {
                    warn!(component = %self.component, reason, error = %e, "could not update event; creating a new one")
                }
            }
        }
        let namespace = regarding.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let object_name = regarding.name.clone().unwrap_or_else(|| self.component.clone());
        let name = format!("{object_name}.{:x}", Timestamp::now().as_nanosecond());
        let event = Event {
            metadata: ObjectMeta { name: Some(name.clone()), namespace: Some(namespace.clone()), ..Default::default() },
            involved_object: regarding.clone(),
            reason: Some(reason.to_owned()),
            message: Some(note),
            type_: Some(type_.as_str().to_owned()),
            source: Some(EventSource { component: Some(self.component.clone()), host: self.host.clone() }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(occurrences),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.host.clone().unwrap_or_else(|| self.component.clone())),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => {
                self.lock().insert(key, Seen { namespace, name, count: occurrences, last: std::time::Instant::now() });
            }
            Err(e) => warn!(component = %self.component, reason, error = %e, "could not publish event"),
        }
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max.saturating_sub(3);
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

fn hostname() -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|s| s.trim().to_owned()))
}

/// `Kind namespace/name` (or `Kind name`) for log lines.
fn describe(r: &ObjectReference) -> String {
    let kind = r.kind.as_deref().unwrap_or("object");
    let name = r.name.as_deref().unwrap_or_default();
    match r.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{kind} {ns}/{name}"),
        _ => format!("{kind} {name}"),
    }
}

/// The reference for events about `obj` (apiVersion, kind, namespace, name, UID).
pub fn object_ref<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        namespace: obj.meta().namespace.clone(),
        name: Some(obj.name_any()),
        uid: obj.meta().uid.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_on_char_boundaries() {
        assert_eq!(truncate("abc".into(), 10), "abc");
        let long = "é".repeat(600);
        let t = truncate(long, 1024);
        assert!(t.len() <= 1024);
        assert!(t.ends_with("..."));
    }

    #[test]
    fn references_carry_api_version_kind_and_namespace() {
        let mut n = k8s_openapi::api::core::v1::Node::default();
        n.metadata.name = Some("n1".into());
        n.metadata.uid = Some("u".into());
        let r = object_ref(&n);
        assert_eq!(r.api_version.as_deref(), Some("v1"));
        assert_eq!(r.kind.as_deref(), Some("Node"));
        assert_eq!(r.name.as_deref(), Some("n1"));
        assert_eq!(r.uid.as_deref(), Some("u"));
        assert_eq!(r.namespace, None);
        assert_eq!(describe(&r), "Node n1");

        let mut s = k8s_openapi::api::core::v1::Service::default();
        s.metadata.name = Some("web".into());
        s.metadata.namespace = Some("shop".into());
        let r = object_ref(&s);
        assert_eq!((r.kind.as_deref(), r.namespace.as_deref()), (Some("Service"), Some("shop")));
        assert_eq!(describe(&r), "Service shop/web");
    }
}
