//! The shared informer against a real kube-apiserver: the initial list, updates (with the
//! previous object), deletions, and `synced` with several waiters.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use controller_runtime::{Change, Informer};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use test_harness::{ControlPlane, NodeBuilder, unique_name, wait_until};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn informer_dispatches_the_initial_list_updates_and_deletions() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("inf");
    let first = unique_name("inf-a");
    let second = unique_name("inf-b");
    NodeBuilder::new(&first).label("informer-test", &group).register(&client).await.expect("node a");

    let mut informer =
        Informer::new(nodes.clone(), watcher::Config::default().labels(&format!("informer-test={group}")));
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    informer.on_change("test", move |c| {
        let line = match c {
            Change::Applied { old, new } => format!("applied {} old={}", new.name_any(), old.is_some()),
            Change::Deleted(gone) => format!("deleted {}", gone.name_any()),
        };
        log.lock().expect("lock").push(line);
    });
    let store = informer.store();
    let synced = informer.synced();
    let token = CancellationToken::new();
    let task = tokio::spawn(informer.run(token.clone()));

    // Several tasks can wait for the first list (kube's Store::wait_until_ready wakes only one).
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            tokio::spawn({
                let s = synced.clone();
                async move { s.wait().await }
            })
        })
        .collect();
    for w in waiters {
        assert!(tokio::time::timeout(Duration::from_secs(30), w).await.expect("synced in time").expect("joins"));
    }
    let has = |line: String| {
        let seen = seen.clone();
        async move || seen.lock().expect("lock").contains(&line)
    };
    wait_until(Duration::from_secs(10), "initial list dispatched", has(format!("applied {first} old=false")))
        .await
        .expect("listed");
    assert!(store.get(&ObjectRef::new(&first)).is_some(), "the store holds listed objects when handlers run");

    NodeBuilder::new(&second).label("informer-test", &group).register(&client).await.expect("node b");
    wait_until(Duration::from_secs(10), "add dispatched", has(format!("applied {second} old=false")))
        .await
        .expect("added");
    nodes
        .patch(&second, &PatchParams::default(), &Patch::Merge(serde_json::json!({"metadata": {"labels": {"x": "y"}}})))
        .await
        .expect("patch");
    wait_until(
        Duration::from_secs(10),
        "update dispatched with the old object",
        has(format!("applied {second} old=true")),
    )
    .await
    .expect("updated");
    nodes.delete(&first, &DeleteParams::default()).await.expect("delete");
    wait_until(Duration::from_secs(10), "delete dispatched", has(format!("deleted {first}"))).await.expect("deleted");
    assert!(store.get(&ObjectRef::new(&first)).is_none());
    assert!(store.get(&ObjectRef::new(&second)).is_some());

    token.cancel();
    task.await.expect("informer stops");
    let _ = nodes.delete(&second, &DeleteParams::default()).await;
}

#[tokio::test]
async fn a_handler_that_panics_does_not_end_the_watch() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.admin_client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let group = unique_name("inf-panic");
    let poison = unique_name("inf-poison");
    let later = unique_name("inf-later");

    let mut informer =
        Informer::new(nodes.clone(), watcher::Config::default().labels(&format!("informer-test={group}")));
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    let bad = poison.clone();
    informer.on_change("test", move |c| {
        if let Change::Applied { new, .. } = c {
            if new.name_any() == bad {
                panic!("the handler hit a bug");
            }
            log.lock().expect("lock").push(new.name_any());
        }
    });
    let synced = informer.synced();
    let token = CancellationToken::new();
    let task = tokio::spawn(informer.run(token.clone()));
    assert!(tokio::time::timeout(Duration::from_secs(30), synced.wait()).await.expect("synced in time"));

    NodeBuilder::new(&poison).label("informer-test", &group).register(&client).await.expect("poison node");
    NodeBuilder::new(&later).label("informer-test", &group).register(&client).await.expect("later node");
    let delivered = wait_until(Duration::from_secs(10), "the node after the panic to be delivered", async || {
        seen.lock().expect("lock").contains(&later)
    })
    .await;
    let (finished, still_synced) = (task.is_finished(), synced.is_synced());
    token.cancel();
    for n in [&poison, &later] {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
    delivered.unwrap_or_else(|e| panic!("{e} (the informer's task ended: {finished})"));
    assert!(still_synced, "the cache is still in sync after the panic");
    task.await.expect("the informer stops without a panic");
    assert!(synced.is_stopped() && !synced.is_synced(), "a stopped informer's cache is not in sync");
}
