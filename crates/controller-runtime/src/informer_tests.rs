use std::sync::Mutex;

use k8s_openapi::api::core::v1::Node;
use kube::api::ObjectMeta;
use sync_lock::Unpoison as _;

use super::*;

/// An informer whose API is never called: the tests feed it watch events themselves.
fn informer() -> Informer<Node> {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
    let client = kube::Client::try_from(config).expect("a client");
    Informer::new(Api::all(client), watcher::Config::default())
}

fn node(name: &str) -> Node {
    Node { metadata: ObjectMeta { name: Some(name.to_owned()), ..Default::default() }, ..Default::default() }
}

/// The name of the object a change is about.
fn name(change: &Change<'_, Node>) -> String {
    let object = match change {
        Change::Applied { new, .. } => new,
        Change::Deleted(gone) => gone,
    };
    object.metadata.name.clone().unwrap_or_default()
}

#[tokio::test]
async fn a_panicking_handler_is_recovered_and_every_handler_gets_the_later_changes() {
    let metrics = RuntimeMetrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut informer = informer().metrics(metrics);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    informer.on_change("buggy-controller", |change| {
        if name(change) == "poison" {
            panic!("the handler hit a bug");
        }
    });
    let log = seen.clone();
    informer.on_change("other-controller", move |change| log.lock_unpoisoned().push(name(change)));

    informer.handle(Event::Init);
    informer.handle(Event::InitApply(node("a")));
    informer.handle(Event::InitDone);
    informer.handle(Event::Apply(node("poison")));
    informer.handle(Event::Apply(node("b")));
    informer.handle(Event::Delete(node("poison")));

    assert_eq!(
        *seen.lock_unpoisoned(),
        ["a", "poison", "b", "poison"],
        "the other handler got the change the first one panicked on, and everything after it"
    );
    assert!(informer.store().get(&ObjectRef::new("b")).is_some(), "the cache follows the watch");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    for needle in [
        "controller_reconcile_panics_total{controller=\"buggy-controller\"} 2\n",
        "controller_reconcile_total{controller=\"buggy-controller\",result=\"error\"} 2\n",
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }
    assert!(!text.contains("other-controller"), "only the panics are counted:\n{text}");
}

#[tokio::test]
async fn synced_turns_false_once_the_informer_stopped() {
    let mut informer = informer();
    let synced = informer.synced();
    assert!(!synced.is_synced());
    informer.handle(Event::Init);
    informer.handle(Event::InitDone);
    assert!(synced.is_synced());
    // The informer's task ends (returned, panicked or aborted): its cache no longer follows
    // the API server.
    assert!(!synced.is_stopped());
    drop(informer);
    assert!(!synced.is_synced(), "a stopped informer's cache is not in sync");
    assert!(synced.is_stopped());
    assert!(synced.wait().await, "it did sync before it stopped");
}
