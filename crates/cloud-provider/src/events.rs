//! Events a provider raises itself (upstream providers hold their own event recorder, e.g. for
//! a port whose protocol the cloud cannot serve), without knowing how they are published.
//!
//! The provider calls [`EventSink::publish`]; the program that embeds it decides where events
//! go (Kubernetes Events, logs). The default sink, [`LogEvents`], only logs.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{Node, Service};

/// The object an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventObject {
    /// `Service`, `Node`, ...
    pub kind: &'static str,
    /// `v1` for core objects.
    pub api_version: &'static str,
    /// Namespace, for namespaced objects.
    pub namespace: Option<String>,
    /// `metadata.name` of the object (empty if the object had none).
    pub name: String,
    /// `metadata.uid` of the object; None for an object not yet stored by the API server.
    pub uid: Option<String>,
}

impl EventObject {
    /// A Service.
    pub fn service(svc: &Service) -> EventObject {
        EventObject {
            kind: "Service",
            api_version: "v1",
            namespace: svc.metadata.namespace.clone(),
            name: svc.metadata.name.clone().unwrap_or_default(),
            uid: svc.metadata.uid.clone(),
        }
    }

    /// A Node.
    pub fn node(node: &Node) -> EventObject {
        EventObject {
            kind: "Node",
            api_version: "v1",
            namespace: None,
            name: node.metadata.name.clone().unwrap_or_default(),
            uid: node.metadata.uid.clone(),
        }
    }
}

/// Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Something expected happened.
    Normal,
    /// Something needs attention.
    Warning,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderEvent {
    /// What it is about.
    pub object: EventObject,
    /// Normal or Warning.
    pub kind: EventKind,
    /// CamelCase reason, e.g. `UnsupportedProtocolConfigured`.
    pub reason: Cow<'static, str>,
    /// What happened and what to do.
    pub message: String,
}

impl ProviderEvent {
    /// A Warning event.
    pub fn warning(object: EventObject, reason: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        ProviderEvent { object, kind: EventKind::Warning, reason: reason.into(), message: message.into() }
    }

    /// A Normal event.
    pub fn normal(object: EventObject, reason: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        ProviderEvent { object, kind: EventKind::Normal, reason: reason.into(), message: message.into() }
    }
}

/// Where a provider's events go. Publishing must not block; failures are the sink's to log.
pub trait EventSink: Send + Sync + 'static {
    /// Publishes one event.
    fn publish(&self, event: ProviderEvent);

    /// Asks the controller responsible for `object` to reconcile it again soon: something the
    /// provider let finish in the background (after the reconcile returned) failed, and no
    /// object change would otherwise bring the controller back. Default: nothing.
    fn resync(&self, object: &EventObject) {
        let _ = object;
    }
}

/// A sink that only logs (through `tracing`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LogEvents;

impl EventSink for LogEvents {
    fn publish(&self, e: ProviderEvent) {
        let object = match &e.object.namespace {
            Some(ns) => format!("{}/{}/{}", e.object.kind, ns, e.object.name),
            None => format!("{}/{}", e.object.kind, e.object.name),
        };
        match e.kind {
            EventKind::Normal => tracing::info!(%object, reason = %e.reason, "{}", e.message),
            EventKind::Warning => tracing::warn!(%object, reason = %e.reason, "{}", e.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_from_services_and_nodes() {
        let mut svc = Service::default();
        svc.metadata.namespace = Some("web".into());
        svc.metadata.name = Some("front".into());
        svc.metadata.uid = Some("u1".into());
        let o = EventObject::service(&svc);
        assert_eq!(
            (o.kind, o.namespace.as_deref(), o.name.as_str(), o.uid.as_deref()),
            ("Service", Some("web"), "front", Some("u1"))
        );
        let mut node = Node::default();
        node.metadata.name = Some("n1".into());
        let o = EventObject::node(&node);
        assert_eq!((o.kind, o.namespace.as_deref(), o.name.as_str()), ("Node", None, "n1"));
        let e = ProviderEvent::warning(o, "MaxTargetsReached", "full");
        assert_eq!(e.kind, EventKind::Warning);
    }
}
