//! The sink a provider's own events go to: core/v1 Events through the controller runtime's
//! recorder (aggregated and logged like every controller's events), published in the
//! background so a provider call never waits for the API server.

use std::sync::Arc;

use cloud_provider::events::{EventKind, EventObject, EventSink, ProviderEvent};
use controller_runtime::EventRecorder;
use k8s_openapi::api::core::v1::ObjectReference;

/// Publishes provider events with an [`EventRecorder`].
#[derive(Clone)]
pub struct RecorderSink {
    recorder: EventRecorder,
}

impl RecorderSink {
    /// A sink publishing through `recorder`.
    pub fn new(recorder: EventRecorder) -> Arc<Self> {
        Arc::new(RecorderSink { recorder })
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
