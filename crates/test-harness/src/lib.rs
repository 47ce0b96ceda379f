//! Test support for hcloud-ccm: a real Kubernetes API server on loopback, kubelet-like Node
//! helpers, deadline-based waiting, event inspection, and child processes that cannot outlive
//! the test.
//!
//! # The pieces
//!
//! - [`ControlPlane`] runs etcd and kube-apiserver (the binaries come from `$KUBEBUILDER_ASSETS`
//!   or from `scripts/provision-control-plane`, which builds kube-apiserver, kubectl and etcd
//!   of Kubernetes 1.37 — or of `$HCLOUD_CCM_KUBERNETES_VERSION` — from their Go modules once
//!   and caches them; a panicking test prints the version it ran against). It writes kubeconfigs for three static-token identities — admin
//!   (`system:masters`), the CCM (the ServiceAccount user bound to exactly the CCM's
//!   ClusterRole from [`rbac`] plus the built-in `system:auth-delegator` and, in `kube-system`,
//!   the built-in Role `extension-apiserver-authentication-reader` for its secure port)
//!   and one without permissions; their bearer tokens are available too — and builds a fresh
//!   [`kube::Client`] per call, because a client belongs to the tokio runtime that created it
//!   and every `#[tokio::test]` has its own. [`ControlPlane::shared`] starts one control plane
//!   per test binary on first use; tests isolate themselves with [`unique_name`]. Tests that
//!   need a cluster to themselves (they run a CCM, which watches every Node) take a turn on
//!   one of the binary's pool instead ([`ControlPlane::exclusive`]), so up to [`pool_size`]
//!   of them run at once.
//! - [`NodeBuilder`] and [`set_ready`] act like a kubelet started with
//!   `--cloud-provider=external`: the Node gets the `uninitialized` taint, a `Ready`
//!   condition, optionally the provided-node-ip annotation, pod CIDRs and a `Hostname`
//!   address; the Node is created with its status in one request, as a kubelet registers.
//! - [`wait_for`], [`wait_until`] and [`wait_for_value`] poll with a deadline (default
//!   [`DEFAULT_TIMEOUT`]) instead of sleeping; a timeout error names what was awaited and shows
//!   the object's last observed state.
//! - [`events_for`] and [`wait_for_event`] read the Events about an object from both
//!   `core/v1` and `events.k8s.io/v1`; [`error_chain`] renders an error with its causes as
//!   anyhow's `{:#}` does.
//! - [`ChildProcess`] runs a binary under test (`hcloud-ccm`, `hcloud-fake`) with its output
//!   in a log file, exit-status capture, graceful stop, and a log dump when a test panics.
//! - [`SecretVolume`] is a directory laid out like a mounted Secret and updated like the
//!   kubelet updates one (the `..data` symlink swapped to a new timestamped directory).
//! - [`TcpProxy`] sits between a client and the API server (or any TCP service) and can
//!   [`cut`](TcpProxy::cut) or [`blackhole`](TcpProxy::blackhole) all traffic and
//!   [`restore`](TcpProxy::restore) it, for partition tests.
//!   [`ControlPlane::client_via`] and [`ControlPlane::kubeconfig_via`] reach the API server
//!   through a proxy (TLS passes through; the serving certificate is valid for 127.0.0.1).
//! - [`audit`]: every control plane keeps an audit log of ServiceAccounts' requests
//!   ([`ControlPlane::audit_events_of`]); [`ControlPlane::service_account_kubeconfig`] gives a
//!   test such an identity, so it can show what a process asked of the API server (no refused
//!   request, no write).
//! - [`oracle`] finds Hetzner's official CCM and `hcloud` CLI (built by
//!   `scripts/provision-oracles`) and starts the official CCM, always without its metadata
//!   lookup; [`oracle::OfficialRelease`] unpacks the official chart and static manifests of the
//!   release source for a test.
//!
//! # Lifelines: no process survives the test binary
//!
//! A `static` is never dropped, a test may panic, and the test binary may be killed, so `Drop`
//! alone cannot guarantee cleanup — and this crate forbids `unsafe`, so there is no
//! `prctl(PR_SET_PDEATHSIG)`. Instead every long-lived process (etcd, kube-apiserver,
//! [`ChildProcess`]) is started through a small `bash` supervisor whose stdin is a pipe whose
//! only write end is held by the test process (Rust creates pipes close-on-exec, so no other
//! child inherits it):
//!
//! 1. the supervisor starts the command (stdin `/dev/null`, output to a log file) and reports
//!    its pid;
//! 2. a reader subshell blocks on the pipe. When the test process exits for any reason —
//!    return, panic, `std::process::exit`, SIGKILL — the kernel closes the write end, the read
//!    returns end-of-file, and the supervisor sends SIGTERM to the command, waits up to 5 s,
//!    sends SIGKILL, and exits; the reader then deletes the temporary directory;
//! 3. if the command exits by itself, the supervisor exits with the command's exit code
//!    (128+N for signal N), which [`ChildProcess::wait_exit`] reports.
//!
//! Dropping a [`ControlPlane`] or [`ChildProcess`] closes the pipe early and waits, so values
//! that are dropped normally clean up synchronously. Orphaned processes are re-parented to
//! pid 1, which on some machines never reaps them: such zombies hold nothing but a pid and
//! count as gone ([`process_alive`]).
//!
//! # TLS
//!
//! The kubeconfigs trust the API server's self-signed serving certificate through
//! `certificate-authority-data` (the `apiserver.crt` the server writes into its `--cert-dir`,
//! which holds the serving certificate and its CA); kube-rs with rustls verifies it against
//! the IP address `127.0.0.1`. No `insecure-skip-tls-verify`.
//!
//! # Example
//!
//! ```no_run
//! use test_harness::{ControlPlane, NodeBuilder, Ready, unique_name, wait_for, DEFAULT_TIMEOUT};
//! use k8s_openapi::api::core::v1::Node;
//! # async fn example() -> Result<(), test_harness::HarnessError> {
//! let control_plane = ControlPlane::shared().await?;
//! let client = control_plane.admin_client().await?;
//! let name = unique_name("node");
//! NodeBuilder::new(&name).provided_node_ip("10.0.0.2").register(&client).await?;
//! let nodes: kube::Api<Node> = kube::Api::all(client);
//! wait_for(&nodes, &name, DEFAULT_TIMEOUT, "the node to exist", |n| n.is_some()).await?;
//! # Ok(())
//! # }
//! ```

mod assets;
pub mod audit;
mod audit_policy;
mod control_plane;
mod error;
mod events;
mod kubeconfig;
mod lifeline;
pub mod module_graph;
mod node;
pub mod oracle;
mod process;
mod provision;
mod proxy;
pub mod rbac;
pub mod real_node;
mod secret_volume;
mod service;
mod turns;
mod wait;

use std::sync::atomic::{AtomicU64, Ordering};

pub use assets::find_assets;
pub use audit::{AuditEvent, WRITE_VERBS};
pub use control_plane::{
    ADMIN_USER, ControlPlane, ControlPlaneOptions, READY_TIMEOUT, RESTRICTED_USER, StaticUser, client_from_kubeconfig,
    process_alive,
};
pub use error::HarnessError;
pub use events::{EventApi, ObservedEvent, events_for, wait_for_event};
pub use node::{NodeBuilder, PROVIDED_NODE_IP_ANNOTATION, Ready, UNINITIALIZED_TAINT_KEY, set_ready};
pub use process::{ChildProcess, DEFAULT_STOP_GRACE};
pub use provision::provisioned_path;
pub use proxy::{ProxyMode, TcpProxy, client_with_server, kubeconfig_with_server};
pub use secret_volume::{SecretVolume, utc_stamp};
pub use service::load_balancer_service;
pub use turns::{DEFAULT_POOL_SIZE, POOL_SIZE_VARIABLE, Turn, pool_size};
pub use wait::{DEFAULT_TIMEOUT, wait_for, wait_for_value, wait_until};

/// `error` and its causes (its [`source`](std::error::Error::source) chain) joined by `: `,
/// exactly as anyhow's `{:#}` prints an error: what a program that reports errors that way
/// shows its operator.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

/// A name unique within the process and very likely across processes: `<prefix>-<n><random>`,
/// lowercase, valid as a Kubernetes object or namespace name (the prefix is lowercased and
/// characters outside `[a-z0-9-]` become `-`; it is cut to keep the result within 63 chars).
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let prefix: String = prefix
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' { c } else { '-' }
        })
        .take(40)
        .collect();
    let prefix = prefix.trim_matches('-');
    let prefix = if prefix.is_empty() { "x" } else { prefix };
    let random: String = std::iter::repeat_with(fastrand::lowercase).take(6).collect();
    format!("{prefix}-{n}{random}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_differ_and_are_dns_labels() {
        let a = unique_name("Svc_Test");
        let b = unique_name("Svc_Test");
        assert_ne!(a, b);
        for name in [&a, &b] {
            assert!(name.starts_with("svc-test-"), "{name}");
            assert!(name.len() <= 63);
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{name}");
        }
        let long = unique_name(&"a".repeat(100));
        assert!(long.len() <= 63, "{long}");
        assert!(unique_name("--").starts_with("x-"));
    }
}
