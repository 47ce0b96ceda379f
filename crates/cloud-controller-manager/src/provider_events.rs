//! The sink a provider's own events go to: core/v1 Events through the controller runtime's
//! recorder (aggregated and logged like every controller's events), published in the
//! background so a provider call never waits for the API server; and the provider's resync
//! requests, handed to the controller that registered for the object's kind.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use cloud_provider::events::{EventKind, EventObject, EventSink, ProviderEvent};
use controller_runtime::EventRecorder;
use k8s_openapi::api::core::v1::ObjectReference;

type Resync = Arc<dyn Fn(&EventObject) + Send + Sync>;

/// Which controller reconciles objects of which kind again when the provider asks
/// ([`EventSink::resync`]). Cheap to clone; clones share the registrations.
#[derive(Clone, Default)]
pub struct Resyncs(Arc<RwLock<HashMap<&'static str, Resync>>>);

impl Resyncs {
    /// Objects of `kind` (e.g. `Service`) are handed to `resync`.
    pub fn register(&self, kind: &'static str, resync: impl Fn(&EventObject) + Send + Sync + 'static) {
        // Whole-entry inserts only; a poisoned map is still consistent.
        self.0.write().unwrap_or_else(|e| e.into_inner()).insert(kind, Arc::new(resync));
    }

    /// Hands `object` to the controller registered for its kind; `false` if there is none.
    pub fn route(&self, object: &EventObject) -> bool {
        let resync = self.0.read().unwrap_or_else(|e| e.into_inner()).get(object.kind).cloned();
        match resync {
            Some(resync) => {
                resync(object);
                true
            }
            None => false,
        }
    }
}

/// Publishes provider events with an [`EventRecorder`] and routes resync requests.
#[derive(Clone)]
pub struct RecorderSink {
    recorder: EventRecorder,
    resyncs: Resyncs,
}

impl RecorderSink {
    /// A sink publishing through `recorder`, routing resync requests through `resyncs`.
    pub fn new(recorder: EventRecorder, resyncs: Resyncs) -> Arc<Self> {
        Arc::new(RecorderSink { recorder, resyncs })
    }
}

/// The Kubernetes reference for an event object.
pub fn object_reference(o: &EventObject) -> ObjectReference {
    ObjectReference {
        api_version: Some(o.api_version.to_owned()),
        kind: Some(o.kind.to_owned()),
        namespace: o.namespace.clone(),
        name: Some(o.name.clone()),
        uid: o.uid.clone(),
        ..Default::default()
    }
}

impl EventSink for RecorderSink {
    fn resync(&self, object: &EventObject) {
        if !self.resyncs.route(object) {
            tracing::debug!(kind = object.kind, name = %object.name, "resync requested; no controller handles this kind");
        }
    }

    fn publish(&self, event: ProviderEvent) {
        let recorder = self.recorder.clone();
        let reference = object_reference(&event.object);
        let publish = async move {
            match event.kind {
                EventKind::Normal => recorder.normal(&reference, &event.reason, event.message).await,
                EventKind::Warning => recorder.warning(&reference, &event.reason, event.message).await,
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(publish);
            }
            Err(_) => tracing::warn!("a provider event was raised outside the async runtime and is dropped"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resync_requests_reach_the_controller_registered_for_the_kind() {
        let resyncs = Resyncs::default();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        resyncs.register("Service", move |o| s.lock().expect("lock").push(o.name.clone()));
        let object = |kind: &'static str, name: &str| EventObject {
            kind,
            api_version: "v1",
            namespace: Some("shop".into()),
            name: name.into(),
            uid: None,
        };
        assert!(resyncs.route(&object("Service", "web")));
        assert!(!resyncs.route(&object("Node", "n1")), "no controller registered for nodes");
        assert_eq!(*seen.lock().expect("lock"), vec!["web".to_owned()]);
    }

    #[test]
    fn references_keep_kind_namespace_and_uid() {
        let o = EventObject {
            kind: "Service",
            api_version: "v1",
            namespace: Some("shop".into()),
            name: "web".into(),
            uid: Some("u1".into()),
        };
        let r = object_reference(&o);
        assert_eq!(r.kind.as_deref(), Some("Service"));
        assert_eq!(r.api_version.as_deref(), Some("v1"));
        assert_eq!(r.namespace.as_deref(), Some("shop"));
        assert_eq!(r.name.as_deref(), Some("web"));
        assert_eq!(r.uid.as_deref(), Some("u1"));
    }
}
