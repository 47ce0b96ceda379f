//! Kubernetes events (events.k8s.io/v1) for the objects controllers act on. Every event is
//! also logged, so a misconfiguration shows up in `kubectl describe` and in the CCM's logs.
//! Publishing failures are logged, never propagated: an event is never a reason to fail.

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use tracing::{info, warn};

/// Publishes events on behalf of one controller.
#[derive(Clone)]
pub struct EventRecorder {
    recorder: Recorder,
    controller: String,
}

impl EventRecorder {
    /// A recorder reporting as `controller` (e.g. `cloud-node-controller`).
    pub fn new(client: Client, controller: &str) -> Self {
        let reporter = Reporter { controller: controller.to_owned(), instance: hostname() };
        EventRecorder { recorder: Recorder::new(client, reporter), controller: controller.to_owned() }
    }

    /// A Normal event.
    pub async fn normal(&self, regarding: &ObjectReference, reason: &str, action: &str, note: String) {
        info!(controller = %self.controller, object = ?regarding.name, reason, "{note}");
        self.publish(regarding, EventType::Normal, reason, action, note).await;
    }

    /// A Warning event.
    pub async fn warning(&self, regarding: &ObjectReference, reason: &str, action: &str, note: String) {
        warn!(controller = %self.controller, object = ?regarding.name, reason, "{note}");
        self.publish(regarding, EventType::Warning, reason, action, note).await;
    }

    async fn publish(&self, regarding: &ObjectReference, type_: EventType, reason: &str, action: &str, note: String) {
        let ev = Event {
            type_,
            reason: reason.to_owned(),
            // events.k8s.io limits the note to 1 KiB.
            note: Some(truncate(note, 1024)),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, regarding).await {
            warn!(controller = %self.controller, reason, error = %e, "could not publish event");
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
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|s| s.trim().to_owned()))
}

/// The reference for events about a node (apiVersion v1, kind Node, name, UID).
pub fn node_ref(node: &Node) -> ObjectReference {
    ObjectReference {
        api_version: Some(Node::api_version(&()).into_owned()),
        kind: Some(Node::kind(&()).into_owned()),
        name: Some(node.name_any()),
        uid: node.metadata.uid.clone(),
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
    fn node_reference_has_api_version() {
        let mut n = Node::default();
        n.metadata.name = Some("n1".into());
        n.metadata.uid = Some("u".into());
        let r = node_ref(&n);
        assert_eq!(r.api_version.as_deref(), Some("v1"));
        assert_eq!(r.kind.as_deref(), Some("Node"));
        assert_eq!(r.name.as_deref(), Some("n1"));
        assert_eq!(r.uid.as_deref(), Some("u"));
    }
}
