//! `--dry-run` next to the official CCM, as an operator tries hcloud-ccm before switching.
//!
//! The official CCM v1.35.0 converges a cluster (a private network, three Nodes, routes, two
//! LoadBalancer Services, one with a `node-selector`), then `node-3` is relabelled to match
//! that selector: the official CCM does not add it as a target until an unrelated sync (a row
//! of docs/migration.md's table), hcloud-ccm would. hcloud-ccm then runs with `--dry-run` next
//! to it, as an audited ServiceAccount of its own and with leader election asked for:
//!
//! - the fake's request log holds no mutating request of its token;
//! - the API server's audit log holds no write of its identity that was stored (every write
//!   went out with `dryRun=All`: authorized, admitted, validated, not stored) and no request on
//!   a Lease at all; the cluster and the fake are exactly as before;
//! - its planned writes (its JSON log) include the target it would add, are counted in
//!   `dry_run_planned_writes_total`, and the Kubernetes ones are exactly those the audit log
//!   saw go out with `dryRun=All`.
//!
//! Then the official CCM stops and hcloud-ccm runs for real with the same identity and flags:
//! the writes it makes (the fake's request log, the audit log) are the planned ones.
//!
//! Compared as: a Hetzner write by method and path; a Kubernetes write by controller (the
//! client's User-Agent), verb, resource and object, where a create names its namespace only
//! and an Event is compared by controller and namespace (its name is a timestamp, and whether a
//! repeat is a create or a patch of the first is timing); the live run's leader election (its
//! Lease and `LeaderElection` Event) is left out: a dry run elects no leader, which is asserted
//! on its own.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject as RbacSubject};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::Value;
use test_harness::{AuditEvent, unique_name, wait_until};

use crate::common::{metrics_address, scrape};
use crate::oracle::cluster::{self, Case};
use crate::oracle::snapshot::differences;
use crate::oracle::subject::{CHART_ARGS, CHART_NETWORKING_ARGS, Config, Subject};
use crate::oracle::world::{CONVERGE, World, tail};

/// The Lease the official CCM (and the live hcloud-ccm) elect on (`differential-*`: a fresh
/// world removes it).
const LEASE: &str = "differential-dry-run";

/// One write, normalised for comparison (see the module's documentation).
type Write = (String, String, String, String);

/// A Kubernetes write as compared: (controller, verb, resource, object).
fn kubernetes_write(
    controller: &str,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Write {
    let ns = namespace.unwrap_or_default();
    if resource == "events" {
        return (controller.to_owned(), "publish".to_owned(), resource.to_owned(), format!("{ns}/"));
    }
    let object = match (verb, namespace, name) {
        ("create", Some(ns), _) => format!("{ns}/"),
        ("create", None, _) => String::new(),
        (_, Some(ns), Some(n)) => format!("{ns}/{n}"),
        (_, None, Some(n)) => n.to_owned(),
        (_, _, None) => format!("{ns}/"),
    };
    (controller.to_owned(), verb.to_owned(), resource.to_owned(), object)
}

/// The controller named last in a controller manager's User-Agent.
fn controller_of(user_agent: &str) -> &str {
    user_agent.rsplit(' ').next().unwrap_or_default()
}

/// An audited write as compared.
fn audited(e: &AuditEvent) -> Write {
    kubernetes_write(controller_of(&e.user_agent), &e.verb, &e.resource, e.namespace.as_deref(), e.name.as_deref())
}

/// The planned writes in a JSON log: (Hetzner writes, Kubernetes writes).
fn planned(log: &str) -> (BTreeSet<Write>, BTreeSet<Write>) {
    let (mut hcloud, mut kubernetes) = (BTreeSet::new(), BTreeSet::new());
    for line in log.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else { continue };
        let f = &entry["fields"];
        if f["message"] != "dry run: write not made" {
            continue;
        }
        let field = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
        if field("api") == "hcloud" {
            hcloud.insert((field("controller"), field("verb"), field("kind"), field("target")));
        } else {
            let target = field("target");
            let (ns, name) = match target.split_once('/') {
                Some((ns, name)) => (Some(ns), Some(name).filter(|n| !n.is_empty())),
                None => (None, Some(target.as_str()).filter(|n| !n.is_empty())),
            };
            kubernetes.insert(kubernetes_write(&field("controller"), &field("verb"), &field("kind"), ns, name));
        }
    }
    (hcloud, kubernetes)
}

/// A Hetzner write as compared: (method, path without `/v1`).
fn hetzner(method: &str, path: &str) -> (String, String) {
    (method.to_owned(), path.strip_prefix("/v1").unwrap_or(path).to_owned())
}

/// An audited ServiceAccount bound to `cluster-admin` (RBAC is not under test here: see
/// official_role_e2e): its kubeconfig and user name.
async fn audited_identity(world: &World) -> (std::path::PathBuf, String) {
    let name = unique_name("dry-run");
    let (kubeconfig, user) = world.cp.service_account_kubeconfig("kube-system", &name).await.expect("ServiceAccount");
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta { name: Some(name.clone()), ..ObjectMeta::default() },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: "cluster-admin".into(),
        },
        subjects: Some(vec![RbacSubject {
            kind: "ServiceAccount".into(),
            name,
            namespace: Some("kube-system".into()),
            ..RbacSubject::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(world.client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
    (kubeconfig, user)
}

/// Waits until the audit log holds a watch of `user` after the first `skip` events (a watch is
/// logged when it ends: the CCM has stopped and its requests are all in), then returns those.
async fn audited_after(world: &World, user: &str, skip: usize) -> Vec<AuditEvent> {
    wait_until(CONVERGE, "the stopped CCM's watches are in the audit log", async || {
        world.cp.audit_events_of(user).is_ok_and(|e| e.iter().skip(skip).any(|e| e.verb == "watch"))
    })
    .await
    .expect("watches logged");
    world.cp.audit_events_of(user).expect("audit log").into_iter().skip(skip).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_next_to_the_official_ccm_writes_nothing_and_plans_what_a_live_run_then_writes() {
    let world = World::fresh().await;
    cluster::seed(&world).await;
    let config = || {
        Config::default().env(&[("HCLOUD_NETWORK", "k8s")]).args(CHART_ARGS).args(CHART_NETWORKING_ARGS).lease(LEASE)
    };
    let at = |name, annotations: &[(&'static str, &'static str)]| {
        let mut all = vec![("location", "fsn1")];
        all.extend_from_slice(annotations);
        Case { name, annotations: all, ports: vec![80], role: None, add_port: false }
    };
    let mut cases =
        vec![at("plain", &[]), Case { role: Some("web"), ..at("selected", &[("node-selector", "role=web")]) }];

    // The official CCM converges the cluster; node-3 then matches the selector.
    let official = world.start(Subject::Official, &config());
    cluster::create(&world, &cases).await;
    let routes = || world.h().snapshot().networks.iter().map(|n| n.routes.len()).sum::<usize>();
    world
        .settle(
            Subject::Official,
            &official,
            "every Node initialized and routed, every Service its Load Balancer",
            async || cluster::converged(&world, &cases).await && routes() == 3,
        )
        .await;
    let patch = serde_json::json!({"metadata": {"labels": {"role": "web"}}});
    world.nodes.patch("node-3", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("label node-3");
    world.settle(Subject::Official, &official, "the relabelled Node was seen", async || true).await;
    cases[1].role = Some("web");
    assert!(!cluster::converged(&world, &cases).await, "the official CCM added node-3 itself: nothing left to plan");

    // hcloud-ccm --dry-run beside it, leader election asked for.
    let (kubeconfig, user) = audited_identity(&world).await;
    let metrics = metrics_address();
    let before = world.snapshot(&[]).await;
    let dry_config = config()
        .kubeconfig(&kubeconfig)
        .args(&["--dry-run", "--logging-format=json"])
        .env(&[("HCLOUD_METRICS_ADDRESS", metrics.as_str())]);
    let dry = world.start(Subject::Ours, &dry_config);
    world
        .settle(Subject::Ours, &dry, "the dry run planned node-3's target and the Services' events", async || {
            let (hcloud, kubernetes) = planned(&dry.logs());
            hcloud.iter().any(|w| w.2 == "/load_balancers/{id}/actions/add_target")
                && kubernetes.iter().any(|w| w.2 == "events" && w.3 == format!("{}/", world.namespace))
        })
        .await;
    let add_target = format!(
        "dry_run_planned_writes_total{{api=\"hcloud\",controller=\"service-lb-controller\",verb=\"POST\",kind=\"{}\"}}",
        "/load_balancers/{id}/actions/add_target"
    );
    assert_eq!(scrape(&metrics, &add_target).await, Some(1.0), "the planned write is counted by controller and kind");
    let after = world.snapshot(&[]).await;
    dry.stop().await.expect("the dry run stops");
    let changes = differences(&before, &after);
    assert!(
        changes.is_empty(),
        "the dry run changed:\n  {}\n{}",
        changes.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "),
        tail(&dry.logs(), 60)
    );

    let mutating: Vec<String> = world
        .h()
        .request_log_for_token(Subject::Ours.token())
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(mutating.is_empty(), "the dry run sent mutating Hetzner requests: {mutating:?}");
    let dry_audit = audited_after(&world, &user, 0).await;
    let stored: Vec<String> =
        dry_audit.iter().filter(|e| e.is_write() && !e.uri.contains("dryRun=All")).map(ToString::to_string).collect();
    assert!(stored.is_empty(), "the dry run wrote to the API server:\n{}", stored.join("\n"));
    let leases: Vec<String> =
        dry_audit.iter().filter(|e| e.resource.starts_with("leases")).map(ToString::to_string).collect();
    assert!(leases.is_empty(), "the dry run touched a Lease:\n{}", leases.join("\n"));
    let (planned_hcloud, planned_kubernetes) = planned(&dry.logs());
    let sent_dry: BTreeSet<Write> = dry_audit.iter().filter(|e| e.is_write()).map(audited).collect();
    assert_eq!(planned_kubernetes, sent_dry, "the planned Kubernetes writes are those sent with dryRun=All");

    // Then for real, after the official CCM.
    let status = official.stop().await.expect("the official CCM stops");
    assert!(status.success() || status.code() == Some(143), "the official CCM exited with {status}");
    let hetzner_mark = world.h().request_log_for_token(Subject::Ours.token()).len();
    let audit_mark = world.cp.audit_events_of(&user).expect("audit log").len();
    let live = world.start(Subject::Ours, &config().kubeconfig(&kubeconfig));
    world
        .settle(Subject::Ours, &live, "node-3 is a target of the selected Service", async || {
            cluster::converged(&world, &cases).await
        })
        .await;
    live.stop().await.expect("hcloud-ccm stops");
    let live_hcloud: BTreeSet<(String, String)> = world
        .h()
        .request_log_for_token(Subject::Ours.token())
        .into_iter()
        .skip(hetzner_mark)
        .filter(|r| r.method != "GET")
        .map(|r| hetzner(&r.method, &r.path))
        .collect();
    let live_kubernetes: BTreeSet<Write> = audited_after(&world, &user, audit_mark)
        .await
        .iter()
        .filter(|e| e.is_write() && controller_of(&e.user_agent) != "leader-election")
        .map(audited)
        .collect();
    let planned_hcloud: BTreeSet<(String, String)> =
        planned_hcloud.iter().map(|(_, verb, _, path)| (verb.clone(), path.clone())).collect();
    println!("planned: {planned_hcloud:?} {planned_kubernetes:?}");
    assert_eq!(planned_hcloud, live_hcloud, "Hetzner: planned vs made\n{}", tail(&live.logs(), 60));
    assert_eq!(planned_kubernetes, live_kubernetes, "Kubernetes: planned vs made\n{}", tail(&live.logs(), 60));
    assert!(
        planned_hcloud.iter().any(|(verb, path)| verb == "POST" && path.ends_with("/actions/add_target")),
        "nothing was planned: {planned_hcloud:?}"
    );
}
