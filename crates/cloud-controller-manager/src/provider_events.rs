//! The sink a provider's own events go to: core/v1 Events through the controller runtime's
//! [`EventQueue`] (bounded like client-go's broadcaster, repeats folded into one event's count,
//! published one at a time in the background and logged like every controller's events), so a
//! provider call never waits for the API server and a provider raising events in a loop cannot
//! pile up tasks or requests; and the provider's resync requests, handed to the controller that
//! registered for the object's kind.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use sync_lock::UnpoisonRw as _;

use cloud_provider::events::{EventKind, EventObject, EventSink, ProviderEvent};
use controller_runtime::EventQueue;
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
        self.0.write_unpoisoned().insert(kind, Arc::new(resync));
    }

    /// Hands `object` to the controller registered for its kind; `false` if there is none.
    pub fn route(&self, object: &EventObject) -> bool {
        let resync = self.0.read_unpoisoned().get(object.kind).cloned();
        match resync {
            Some(resync) => {
                resync(object);
                true
            }
            None => false,
        }
    }
}

/// Queues provider events on an [`EventQueue`] and routes resync requests.
#[derive(Clone)]
pub struct RecorderSink {
    events: EventQueue,
    resyncs: Resyncs,
}

impl RecorderSink {
    /// A sink queueing events on `events` (whose [`EventQueue::run`] the caller runs), routing
    /// resync requests through `resyncs`.
    pub fn new(events: EventQueue, resyncs: Resyncs) -> Arc<Self> {
        Arc::new(RecorderSink { events, resyncs })
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
        let reference = object_reference(&event.object);
        // Never waits; a full queue drops the event and counts it.
        let _ = match event.kind {
            EventKind::Normal => self.events.normal(reference, &event.reason, event.message),
            EventKind::Warning => self.events.warning(reference, &event.reason, event.message),
        };
    }
}

#[cfg(test)]
mod tests {
    use controller_runtime::events::queue::DEFAULT_QUEUE_CAPACITY;
    use controller_runtime::{EventRecorder, RuntimeMetrics};
    use tokio_util::sync::CancellationToken;

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

    /// A Kubernetes API that never answers; it records the method and body of every request.
    #[derive(Clone, Default)]
    struct Silent {
        requests: Arc<std::sync::Mutex<Vec<(http::Method, String)>>>,
    }

    type Response = http::Response<kube::client::Body>;

    impl tower::Service<http::Request<kube::client::Body>> for Silent {
        type Response = Response;
        type Error = std::io::Error;
        type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Response, std::io::Error>> + Send>>;

        fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
            let requests = self.requests.clone();
            let method = request.method().clone();
            Box::pin(async move {
                let body = request.into_body().collect_bytes().await.unwrap_or_default();
                requests.lock().expect("lock").push((method, String::from_utf8_lossy(&body).into_owned()));
                std::future::pending().await
            })
        }
    }

    fn service(name: &str) -> EventObject {
        EventObject { kind: "Service", api_version: "v1", namespace: Some("shop".into()), name: name.into(), uid: None }
    }

    async fn settle() {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }

    /// A sink whose queue publishes to `api`, and that queue.
    fn sink(api: &Silent, shutdown: &CancellationToken) -> (Arc<RecorderSink>, EventQueue) {
        let recorder = EventRecorder::new(kube::Client::new(api.clone(), "default"), "test-provider");
        let events = EventQueue::new(recorder, DEFAULT_QUEUE_CAPACITY, &RuntimeMetrics::default());
        tokio::spawn(events.clone().run(shutdown.clone()));
        (RecorderSink::new(events.clone(), Resyncs::default()), events)
    }

    #[tokio::test]
    async fn a_burst_of_distinct_events_keeps_at_most_a_thousand_pending() {
        let (api, shutdown) = (Silent::default(), CancellationToken::new());
        let (sink, events) = sink(&api, &shutdown);
        for i in 0..5000 {
            sink.publish(ProviderEvent::warning(service(&format!("web-{i}")), "Broken", format!("attempt {i}")));
        }
        settle().await;
        let requests = api.requests.lock().expect("lock").len();
        assert!(
            requests <= 1,
            "one event is published at a time, the rest wait in the queue: {requests} requests in flight"
        );
        assert_eq!(
            (events.pending(), events.dropped()),
            (999, 4000),
            "1,000 queued (one of them in flight), the rest dropped"
        );
        shutdown.cancel();
    }

    #[tokio::test]
    async fn repeats_of_one_event_are_aggregated_into_its_count() {
        let (api, shutdown) = (Silent::default(), CancellationToken::new());
        let (sink, _) = sink(&api, &shutdown);
        for _ in 0..5000 {
            sink.publish(ProviderEvent::warning(service("web"), "Broken", "the same problem"));
        }
        settle().await;
        let requests = api.requests.lock().expect("lock").clone();
        assert_eq!(requests.len(), 1, "one Event for 5000 repeats");
        let (method, body) = &requests[0];
        assert_eq!(method, http::Method::POST);
        let event: serde_json::Value = serde_json::from_str(body).expect("an Event");
        assert_eq!(event["count"], 5000, "{body}");
        assert_eq!(event["message"], "the same problem", "{body}");
        shutdown.cancel();
    }
}
