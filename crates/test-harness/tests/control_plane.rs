//! The harness against a real kube-apiserver: one shared control plane for this test binary.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, Node, ObjectReference, Secret};
use k8s_openapi::api::events::v1::Event as EventsV1Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use test_harness::{
    ControlPlane, EventApi, NodeBuilder, PROVIDED_NODE_IP_ANNOTATION, Ready, UNINITIALIZED_TAINT_KEY, events_for, rbac,
    set_ready, unique_name, wait_for, wait_for_event,
};

async fn admin() -> Result<(&'static ControlPlane, Client)> {
    let control_plane = ControlPlane::shared().await?;
    let client = control_plane.admin_client().await?;
    Ok((control_plane, client))
}

fn ready_status(node: &Node) -> Option<String> {
    node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready").map(|c| c.status.clone())
}

#[tokio::test]
async fn kubectl_sees_a_node_registered_like_a_kubelet() -> Result<()> {
    let (control_plane, client) = admin().await?;
    let name = unique_name("kubectl-node");
    NodeBuilder::new(&name)
        .provided_node_ip("10.0.0.2")
        .pod_cidrs(["10.244.1.0/24"])
        .kubelet_hostname_address(true)
        .register(&client)
        .await?;

    let kubeconfig = std::fs::read_to_string(control_plane.admin_kubeconfig())?;
    ensure!(kubeconfig.contains("certificate-authority-data"));
    ensure!(!kubeconfig.contains("insecure-skip-tls-verify"));

    let output = tokio::process::Command::new(control_plane.kubectl_path())
        .arg("--kubeconfig")
        .arg(control_plane.admin_kubeconfig())
        .args(["get", "node", &name, "-o", "json"])
        .output()
        .await
        .context("running kubectl")?;
    ensure!(output.status.success(), "kubectl failed: {}", String::from_utf8_lossy(&output.stderr));
    let node: Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(node["metadata"]["annotations"][PROVIDED_NODE_IP_ANNOTATION], json!("10.0.0.2"));
    assert_eq!(
        node["spec"]["taints"],
        json!([{"key": UNINITIALIZED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}])
    );
    assert_eq!(node["spec"]["podCIDR"], json!("10.244.1.0/24"));
    assert_eq!(node["spec"]["podCIDRs"], json!(["10.244.1.0/24"]));
    let conditions = node["status"]["conditions"].as_array().context("no conditions")?;
    let ready = conditions.iter().find(|c| c["type"] == "Ready").context("no Ready condition")?;
    assert_eq!(ready["status"], json!("True"));
    assert_eq!(ready["reason"], json!("KubeletReady"));
    assert_eq!(node["status"]["addresses"], json!([{"type": "Hostname", "address": name}]));
    Ok(())
}

#[tokio::test]
async fn a_stale_update_gets_409() -> Result<()> {
    let (_, client) = admin().await?;
    let name = unique_name("stale");
    let stale = NodeBuilder::new(&name).register(&client).await?;
    let nodes: Api<Node> = Api::all(client);
    let patch = json!({"metadata": {"labels": {"touched": "yes"}}});
    let fresh = nodes.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    ensure!(fresh.metadata.resource_version != stale.metadata.resource_version);

    match nodes.replace(&name, &PostParams::default(), &stale).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 409, "{status:?}");
            assert!(status.is_conflict());
        }
        Ok(_) => bail!("replacing with an old resourceVersion succeeded"),
        Err(e) => bail!("unexpected error: {e}"),
    }
    Ok(())
}

#[tokio::test]
async fn ccm_identity_has_exactly_the_ccm_permissions() -> Result<()> {
    let (control_plane, admin_client) = admin().await?;
    let name = unique_name("rbac");
    NodeBuilder::new(&name).register(&admin_client).await?;

    let ccm = control_plane.ccm_client().await?;
    let nodes: Api<Node> = Api::all(ccm.clone());
    let patch = json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"}]}});
    let patched = nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .context("CCM patching nodes/status")?;
    let addresses = patched.status.and_then(|s| s.addresses).unwrap_or_default();
    assert_eq!(addresses.len(), 1);
    assert_eq!(addresses[0].address, "10.0.0.7");

    let events: Api<CoreEvent> = Api::namespaced(ccm.clone(), "default");
    events
        .create(&PostParams::default(), &core_event(&name, "RbacProbe"))
        .await
        .context("CCM creating a core/v1 event")?;

    // The built-in Role extension-apiserver-authentication-reader: that one ConfigMap (present
    // or not), no other.
    let configmaps: Api<ConfigMap> = Api::namespaced(ccm.clone(), rbac::AUTHENTICATION_NAMESPACE);
    configmaps
        .get_opt(rbac::AUTHENTICATION_CONFIGMAP)
        .await
        .context("CCM reading kube-system/extension-apiserver-authentication")?;
    for other in [
        configmaps.get_opt("kube-root-ca.crt").await.map(|_| ()),
        configmaps.list(&ListParams::default()).await.map(|_| ()),
    ] {
        match other {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
            other => bail!("CCM reading other ConfigMaps: expected 403, got {other:?}"),
        }
    }

    // Not in the CCM's role: Secrets.
    let secrets: Api<Secret> = Api::namespaced(ccm, "kube-system");
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => bail!("CCM listing secrets: expected 403, got {other:?}"),
    }

    let nobody: Api<Node> = Api::all(control_plane.restricted_client().await?);
    match nobody.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert!(status.is_forbidden());
        }
        other => bail!("no-permission identity listing nodes: expected 403, got {other:?}"),
    }
    Ok(())
}

fn core_event(node: &str, reason: &str) -> CoreEvent {
    let now = Timestamp::now();
    CoreEvent {
        metadata: ObjectMeta {
            name: Some(unique_name("ev")),
            namespace: Some("default".to_owned()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(node.to_owned()),
            uid: Some(node.to_owned()),
            ..ObjectReference::default()
        },
        reason: Some(reason.to_owned()),
        message: Some(format!("core event {reason}")),
        type_: Some("Normal".to_owned()),
        count: Some(1),
        first_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now)),
        last_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now)),
        source: Some(k8s_openapi::api::core::v1::EventSource {
            component: Some("test-harness".to_owned()),
            host: None,
        }),
        ..CoreEvent::default()
    }
}

#[tokio::test]
async fn events_are_read_from_both_event_apis() -> Result<()> {
    let (control_plane, admin_client) = admin().await?;
    let name = unique_name("events");
    NodeBuilder::new(&name).register(&admin_client).await?;
    let ccm = control_plane.ccm_client().await?;

    Api::<CoreEvent>::namespaced(ccm.clone(), "default")
        .create(&PostParams::default(), &core_event(&name, "FromCoreV1"))
        .await
        .context("creating a core/v1 event")?;
    // An `events.k8s.io/v1` event about the (cluster-scoped) Node, in `default` where
    // kube-runtime's Recorder puts them.
    let v1_event = EventsV1Event {
        metadata: ObjectMeta {
            name: Some(unique_name("ev")),
            namespace: Some("default".to_owned()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(Timestamp::now())),
        reporting_controller: Some("test-harness/events".to_owned()),
        reporting_instance: Some("test".to_owned()),
        action: Some("Probing".to_owned()),
        reason: Some("FromEventsV1".to_owned()),
        note: Some("events.k8s.io event".to_owned()),
        type_: Some("Warning".to_owned()),
        regarding: Some(ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(name.clone()),
            ..ObjectReference::default()
        }),
        ..EventsV1Event::default()
    };
    // The CCM writes core/v1 events only, and its shipped role has no events.k8s.io rights.
    Api::<EventsV1Event>::namespaced(admin_client.clone(), "default")
        .create(&PostParams::default(), &v1_event)
        .await
        .context("creating an events.k8s.io/v1 event")?;

    let found = wait_for_event(&admin_client, "Node", &name, "FromEventsV1", Duration::from_secs(10)).await?;
    assert_eq!(found.type_, "Warning");
    assert_eq!(found.message, "events.k8s.io event");

    let events = events_for(&admin_client, "Node", &name).await?;
    let mut reasons: Vec<&str> = events.iter().map(|e| e.reason.as_str()).collect();
    reasons.sort_unstable();
    // Each event once, although both APIs show both.
    assert_eq!(reasons, ["FromCoreV1", "FromEventsV1"], "{events:?}");
    let namespaces: Vec<(&str, &str)> = events.iter().map(|e| (e.reason.as_str(), e.namespace.as_str())).collect();
    assert!(namespaces.contains(&("FromCoreV1", "default")), "{namespaces:?}");
    assert!(namespaces.contains(&("FromEventsV1", "default")), "{namespaces:?}");
    assert!(events.iter().any(|e| e.api == EventApi::CoreV1));

    let other = events_for(&admin_client, "Node", &unique_name("nothing")).await?;
    assert!(other.is_empty(), "{other:?}");

    let missing = wait_for_event(&admin_client, "Node", &name, "NeverRecorded", Duration::from_millis(500)).await;
    let message = missing.err().context("expected a timeout")?.to_string();
    assert!(message.contains("NeverRecorded"), "{message}");
    assert!(message.contains("FromCoreV1"), "{message}");
    Ok(())
}

#[tokio::test]
async fn set_ready_changes_only_the_ready_condition() -> Result<()> {
    let (_, client) = admin().await?;
    let name = unique_name("ready");
    let node = NodeBuilder::new(&name).register(&client).await?;
    assert_eq!(ready_status(&node).as_deref(), Some("True"));

    let node = set_ready(&client, &name, Ready::False).await?;
    assert_eq!(ready_status(&node).as_deref(), Some("False"));
    let node = set_ready(&client, &name, Ready::Unknown).await?;
    assert_eq!(ready_status(&node).as_deref(), Some("Unknown"));
    let node = set_ready(&client, &name, Ready::Absent).await?;
    assert_eq!(ready_status(&node), None);

    let absent = NodeBuilder::new(unique_name("absent")).ready(Ready::Absent).register(&client).await?;
    assert_eq!(ready_status(&absent), None);
    Ok(())
}

#[tokio::test]
async fn wait_for_reports_the_last_observed_state() -> Result<()> {
    let (_, client) = admin().await?;
    let name = unique_name("waitfor");
    NodeBuilder::new(&name).label("marker", "last-state-visible").register(&client).await?;
    let nodes: Api<Node> = Api::all(client);

    let seen = wait_for(&nodes, &name, Duration::from_secs(5), "the node to exist", |n| n.is_some()).await?;
    ensure!(seen.is_some());

    let result = wait_for(&nodes, &name, Duration::from_millis(600), "a providerID that is never set", |n| {
        n.and_then(|n| n.spec.as_ref()?.provider_id.as_ref()).is_some()
    })
    .await;
    let message = result.err().context("expected a timeout")?.to_string();
    assert!(message.contains("a providerID that is never set"), "{message}");
    assert!(message.contains("last-state-visible"), "{message}");
    assert!(message.contains(UNINITIALIZED_TAINT_KEY), "{message}");

    nodes.delete(&name, &Default::default()).await?;
    let gone = wait_for(&nodes, &name, Duration::from_secs(10), "the node to be deleted", |n| n.is_none()).await?;
    ensure!(gone.is_none());
    Ok(())
}

#[test]
fn shared_is_one_instance_across_runtimes() -> Result<()> {
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| -> Result<(usize, usize)> {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                runtime.block_on(async {
                    let control_plane = ControlPlane::shared().await?;
                    // A client made in this runtime works in this runtime.
                    let client = control_plane.admin_client().await?;
                    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
                    let list = namespaces.list(&ListParams::default()).await?;
                    Ok((std::ptr::from_ref(control_plane) as usize, list.items.len()))
                })
            })
        })
        .collect();
    let mut addresses = Vec::new();
    for thread in threads {
        let (address, namespaces) = thread.join().map_err(|_| anyhow::anyhow!("thread panicked"))??;
        ensure!(namespaces >= 2, "expected default and kube-system");
        addresses.push(address);
    }
    addresses.dedup();
    assert_eq!(addresses.len(), 1, "more than one shared control plane");
    // Still running after the runtimes that first used it are gone.
    let control_plane =
        tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(ControlPlane::shared())?;
    assert_eq!(std::ptr::from_ref(control_plane) as usize, addresses[0]);
    assert!(control_plane.is_running());
    Ok(())
}

#[tokio::test]
async fn a_proxy_partitions_clients_from_the_apiserver_and_heals_them() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let proxy = control_plane.apiserver_proxy()?;
    assert_eq!(proxy.target(), control_plane.apiserver_addr()?);
    // TLS is verified end to end through the proxy (the certificate is for 127.0.0.1).
    let client = control_plane.client_via(control_plane.ccm_kubeconfig(), &proxy).await?;
    let nodes: Api<Node> = Api::all(client);
    nodes.list(&ListParams::default().limit(1)).await.context("listing through the proxy")?;
    ensure!(proxy.accepted_connections() >= 1);

    // Cut: requests fail promptly instead of hanging.
    proxy.cut();
    let cut = tokio::time::timeout(Duration::from_secs(20), nodes.list(&ListParams::default().limit(1))).await;
    assert!(matches!(cut, Ok(Err(_))), "a request while cut fails (not hangs, not succeeds): {cut:?}");
    proxy.restore();
    test_harness::wait_until(Duration::from_secs(30), "a request through the restored proxy", async || {
        nodes.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await?;

    // Blackhole: requests hang; after restoring they succeed again.
    proxy.blackhole();
    let stalled = tokio::time::timeout(Duration::from_secs(1), nodes.list(&ListParams::default().limit(1))).await;
    assert!(stalled.is_err(), "a request through a blackholed proxy neither succeeds nor fails: {stalled:?}");
    proxy.restore();
    test_harness::wait_until(Duration::from_secs(30), "a request after the blackhole", async || {
        matches!(
            tokio::time::timeout(Duration::from_secs(5), nodes.list(&ListParams::default().limit(1))).await,
            Ok(Ok(_))
        )
    })
    .await?;

    // A kubeconfig file for child processes, through the proxy.
    let kubeconfig = control_plane.kubeconfig_via(control_plane.admin_kubeconfig(), &proxy)?;
    let kubectl = |args: &'static [&'static str]| {
        tokio::process::Command::new(control_plane.kubectl_path())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--request-timeout=5s"])
            .args(args)
            .output()
    };
    let output = kubectl(&["get", "namespace", "kube-system", "-o", "name"]).await?;
    ensure!(output.status.success(), "kubectl via the proxy failed: {}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "namespace/kube-system");
    proxy.cut();
    let output = kubectl(&["get", "namespace", "kube-system", "-o", "name"]).await?;
    ensure!(!output.status.success(), "kubectl must fail while the proxy is cut");
    Ok(())
}
