//! [`ControlPlane`]: a real kube-apiserver + etcd on loopback, with admin, CCM and
//! no-permission identities.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use tempfile::TempDir;
use tokio::sync::OnceCell;

use crate::assets::{
    ApiServerVersion, VERSION_VARIABLE, apiserver_version, check_served_version, find_assets, run_checked,
};
use crate::error::HarnessError;
use crate::kubeconfig::{base64, kubeconfig};
use crate::lifeline::{Supervised, pid_alive, tail_file};
use crate::rbac;

/// How long [`ControlPlane::start`] waits for `/readyz` (each attempt).
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How often a start is retried when a freshly picked port turned out to be taken.
const PORT_ATTEMPTS: usize = 3;

/// Field manager used for the objects the harness applies.
const FIELD_MANAGER: &str = "test-harness";

/// User name of the admin identity (group `system:masters`).
pub const ADMIN_USER: &str = "harness-admin";
/// User name of the identity without any permissions beyond `system:authenticated`.
pub const RESTRICTED_USER: &str = "harness-nobody";

static SHARED: OnceCell<Result<ControlPlane, String>> = OnceCell::const_new();

/// A running kube-apiserver and etcd, both bound to 127.0.0.1 on free ports, with everything in
/// one temporary directory (etcd data, serving certificates, service-account key, token file,
/// kubeconfigs and logs).
///
/// Identities (static bearer tokens):
/// - admin ([`ADMIN_USER`], group `system:masters`): [`Self::admin_kubeconfig`];
/// - the CCM ([`rbac::CCM_USER`], the ServiceAccount user, bound to
///   [`rbac::CCM_CLUSTER_ROLE`], to the built-in [`rbac::AUTH_DELEGATOR_CLUSTER_ROLE`] and, in
///   `kube-system`, to the built-in Role [`rbac::AUTHENTICATION_READER_ROLE`] for its secure
///   port, nothing else): [`Self::ccm_kubeconfig`];
/// - no permissions ([`RESTRICTED_USER`]): [`Self::restricted_kubeconfig`].
///
/// The admission plugin `TaintNodesByCondition` is disabled: with no kube-controller-manager
/// nobody would remove the `node.kubernetes.io/not-ready` taint it adds to every new Node, so
/// Nodes carry exactly the taints a test gives them. There is no kube-controller-manager or
/// scheduler at all: no namespace finalisation, garbage collection, Endpoints or node-lifecycle
/// behaviour.
///
/// The value holds no Kubernetes clients: a `kube::Client` belongs to the tokio runtime that
/// created it, and every `#[tokio::test]` has its own runtime, so the `*_client` methods build
/// a fresh client per call.
///
/// Dropping the value stops both processes and removes the directory. The processes also stop
/// when the test process exits without dropping it (see the crate docs, "Lifelines").
#[derive(Debug)]
pub struct ControlPlane {
    apiserver: Supervised,
    etcd: Supervised,
    dir: TempDir,
    assets: PathBuf,
    server_url: String,
    admin_kubeconfig: PathBuf,
    ccm_kubeconfig: PathBuf,
    restricted_kubeconfig: PathBuf,
    tokens: Tokens,
    /// Kubeconfigs of [`ControlPlaneOptions::users`], by user name.
    user_kubeconfigs: std::collections::BTreeMap<String, PathBuf>,
    version: String,
    startup: Duration,
    time_to_readyz: Duration,
}

/// Bearer tokens of the three identities and the extra users (random per control plane;
/// `Debug` redacts them).
struct Tokens {
    admin: String,
    ccm: String,
    restricted: String,
    /// `(user, groups, token)` of [`ControlPlaneOptions::users`].
    users: Vec<(StaticUser, String)>,
}

/// How [`ControlPlane::start_with`] starts the control plane; the default is what
/// [`ControlPlane::start`] does.
#[derive(Debug, Clone, Default)]
pub struct ControlPlaneOptions {
    /// The address kube-apiserver binds and advertises instead of 127.0.0.1: a test that runs
    /// kubelets in network namespaces gives the host end of the bridge it created (the serving
    /// certificate is then valid for it).
    pub address: Option<std::net::Ipv4Addr>,
    /// More static-token identities, each with a kubeconfig ([`ControlPlane::user_kubeconfig`]).
    pub users: Vec<StaticUser>,
}

/// A static-token identity of kube-apiserver (`--token-auth-file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticUser {
    /// The user name, e.g. `system:node:node-1`.
    pub name: String,
    /// Its groups, e.g. `system:nodes`.
    pub groups: Vec<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens { <redacted> }")
    }
}

impl ControlPlane {
    /// The control plane shared by all tests of this test binary, started on first use.
    ///
    /// Safe to call concurrently from many `#[tokio::test]`s (each with its own runtime): the
    /// processes are plain `std::process` children, not bound to any runtime. If the start
    /// fails, every caller gets the same error without another attempt. Isolate tests by
    /// unique names ([`crate::unique_name`]).
    pub async fn shared() -> Result<&'static ControlPlane, HarnessError> {
        let result = SHARED.get_or_init(|| async { ControlPlane::start().await.map_err(|e| e.to_string()) }).await;
        match result {
            Ok(control_plane) => Ok(control_plane),
            Err(message) => Err(HarnessError::SharedStart(message.clone())),
        }
    }

    /// Start a new, private control plane: find the binaries, start etcd and kube-apiserver,
    /// wait for `/readyz`, apply the CCM's RBAC and wait until it is in effect.
    pub async fn start() -> Result<ControlPlane, HarnessError> {
        Self::start_with(ControlPlaneOptions::default()).await
    }

    /// [`Self::start`] with another address and more identities.
    pub async fn start_with(options: ControlPlaneOptions) -> Result<ControlPlane, HarnessError> {
        let started = Instant::now();
        let assets = find_assets().await?;
        let version = apiserver_version(&assets).await?;
        note_version_on_panic(format!(
            "note: this test ran against kube-apiserver {} ({}); HCLOUD_CCM_KUBERNETES_VERSION or \
             KUBEBUILDER_ASSETS picks another",
            version.full,
            assets.display()
        ));
        let mut attempt = 0;
        loop {
            attempt += 1;
            match start_once(&assets, &version, &options).await {
                Ok(mut control_plane) => {
                    let served = control_plane.served_version().await?;
                    let requested = std::env::var(VERSION_VARIABLE).ok();
                    check_served_version(requested.as_deref(), &served, &assets)?;
                    control_plane.bootstrap().await?;
                    control_plane.startup = started.elapsed();
                    return Ok(control_plane);
                }
                Err(StartFailure::PortTaken(error)) if attempt < PORT_ATTEMPTS => {
                    tracing::warn!(attempt, "a port was taken, retrying: {error}");
                }
                Err(StartFailure::PortTaken(error) | StartFailure::Other(error)) => {
                    return Err(error);
                }
            }
        }
    }

    /// The `gitVersion` the running API server reports on `/version`.
    async fn served_version(&self) -> Result<String, HarnessError> {
        let info = self
            .admin_client()
            .await?
            .apiserver_version()
            .await
            .map_err(|e| HarnessError::kube("reading the API server's /version", e))?;
        Ok(info.git_version)
    }

    /// Create the namespaces and the CCM's RBAC objects, then wait until the CCM identity can
    /// list Nodes, create TokenReviews and read the ConfigMap
    /// [`rbac::AUTHENTICATION_CONFIGMAP`] (the RBAC authoriser reads from a cache, so bindings
    /// apply after a moment).
    async fn bootstrap(&self) -> Result<(), HarnessError> {
        let admin = self.admin_client().await?;
        let namespaces: Api<Namespace> = Api::all(admin.clone());
        for name in ["kube-system", "default"] {
            let namespace = Namespace {
                metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
                ..Namespace::default()
            };
            match namespaces.create(&PostParams::default(), &namespace).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.is_already_exists() => {}
                Err(e) => return Err(HarnessError::kube(format!("creating namespace {name}"), e)),
            }
        }
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        let service_account = rbac::ccm_service_account();
        Api::<ServiceAccount>::namespaced(admin.clone(), rbac::CCM_NAMESPACE)
            .patch(rbac::CCM_SERVICE_ACCOUNT, &apply, &Patch::Apply(&service_account))
            .await
            .map_err(|e| HarnessError::kube("applying the CCM ServiceAccount", e))?;
        let role = rbac::ccm_cluster_role()?;
        Api::<ClusterRole>::all(admin.clone())
            .patch(rbac::CCM_CLUSTER_ROLE, &apply, &Patch::Apply(&role))
            .await
            .map_err(|e| HarnessError::kube("applying the CCM ClusterRole", e))?;
        let binding = rbac::ccm_cluster_role_binding();
        let bindings = Api::<ClusterRoleBinding>::all(admin.clone());
        bindings
            .patch(rbac::CCM_CLUSTER_ROLE_BINDING, &apply, &Patch::Apply(&binding))
            .await
            .map_err(|e| HarnessError::kube("applying the CCM ClusterRoleBinding", e))?;
        let delegator = rbac::ccm_auth_delegator_binding();
        bindings
            .patch(rbac::CCM_AUTH_DELEGATOR_BINDING, &apply, &Patch::Apply(&delegator))
            .await
            .map_err(|e| HarnessError::kube("applying the CCM's auth-delegator ClusterRoleBinding", e))?;
        let reader = rbac::ccm_authentication_reader_binding();
        Api::<RoleBinding>::namespaced(admin, rbac::AUTHENTICATION_NAMESPACE)
            .patch(rbac::CCM_AUTHENTICATION_READER_BINDING, &apply, &Patch::Apply(&reader))
            .await
            .map_err(|e| {
                HarnessError::kube("applying the CCM's extension-apiserver-authentication-reader RoleBinding", e)
            })?;

        let ccm = self.ccm_client().await?;
        let nodes: Api<Node> = Api::all(ccm.clone());
        let token_reviews: Api<TokenReview> = Api::all(ccm.clone());
        let authentication: Api<ConfigMap> = Api::namespaced(ccm, rbac::AUTHENTICATION_NAMESPACE);
        // A review of a token that does not exist: allowed once the auth-delegator binding
        // applies (the answer is "not authenticated"), 403 before.
        let review = TokenReview {
            spec: TokenReviewSpec { token: "harness-rbac-probe".to_owned(), audiences: None },
            ..TokenReview::default()
        };
        let mut last_error = String::new();
        let effective = crate::wait::wait_until(Duration::from_secs(20), "the CCM's RBAC to take effect", async || {
            let listed = nodes.list(&ListParams::default().limit(1)).await.map(|_| ());
            let reviewed = match listed {
                Ok(()) => token_reviews.create(&PostParams::default(), &review).await.map(|_| ()),
                Err(e) => Err(e),
            };
            // Allowed (present or not) once the reader binding applies, 403 before.
            let read = match reviewed {
                Ok(()) => authentication.get_opt(rbac::AUTHENTICATION_CONFIGMAP).await.map(|_| ()),
                Err(e) => Err(e),
            };
            match read {
                Ok(()) => true,
                Err(e) => {
                    last_error = e.to_string();
                    false
                }
            }
        })
        .await;
        effective.map_err(|e| HarnessError::ControlPlaneNotReady {
            reason: format!("{e}; last error: {last_error}"),
            detail: self.log_tails(),
        })
    }

    /// The API server's version as it reports it, e.g. `v1.37.2`.
    pub fn kubernetes_version(&self) -> &str {
        &self.version
    }

    /// The API server's minor version, e.g. 36.
    pub fn kubernetes_minor(&self) -> u32 {
        self.version.strip_prefix("v1.").and_then(|r| r.split('.').next()).and_then(|m| m.parse().ok()).unwrap_or(0)
    }

    /// The API server URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// Kubeconfig of the admin identity (group `system:masters`).
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// Kubeconfig of the CCM identity ([`rbac::CCM_USER`], only the CCM's ClusterRole).
    pub fn ccm_kubeconfig(&self) -> &Path {
        &self.ccm_kubeconfig
    }

    /// Kubeconfig of a user of [`ControlPlaneOptions::users`].
    pub fn user_kubeconfig(&self, user: &str) -> Option<&Path> {
        self.user_kubeconfigs.get(user).map(PathBuf::as_path)
    }

    /// Kubeconfig of the identity without permissions ([`RESTRICTED_USER`]).
    pub fn restricted_kubeconfig(&self) -> &Path {
        &self.restricted_kubeconfig
    }

    /// The `kubectl` from the assets directory (same version as the API server).
    pub fn kubectl_path(&self) -> PathBuf {
        self.assets.join("kubectl")
    }

    /// The directory holding kube-apiserver, etcd and kubectl.
    pub fn assets_dir(&self) -> &Path {
        &self.assets
    }

    /// The control plane's temporary directory (removed on drop or when the test process
    /// exits).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The admin identity's bearer token (for HTTP clients other than kube-rs, e.g. requests to
    /// a server that delegates authentication to this API server).
    pub fn admin_token(&self) -> &str {
        &self.tokens.admin
    }

    /// The CCM identity's bearer token.
    pub fn ccm_token(&self) -> &str {
        &self.tokens.ccm
    }

    /// The no-permission identity's bearer token.
    pub fn restricted_token(&self) -> &str {
        &self.tokens.restricted
    }

    /// A new client with the admin identity, bound to the calling tokio runtime.
    pub async fn admin_client(&self) -> Result<Client, HarnessError> {
        client_from_kubeconfig(&self.admin_kubeconfig).await
    }

    /// A new client with the CCM identity, bound to the calling tokio runtime.
    pub async fn ccm_client(&self) -> Result<Client, HarnessError> {
        client_from_kubeconfig(&self.ccm_kubeconfig).await
    }

    /// A new client with the no-permission identity, bound to the calling tokio runtime.
    pub async fn restricted_client(&self) -> Result<Client, HarnessError> {
        client_from_kubeconfig(&self.restricted_kubeconfig).await
    }

    /// Process id of kube-apiserver.
    pub fn apiserver_pid(&self) -> u32 {
        self.apiserver.pid()
    }

    /// Process id of etcd.
    pub fn etcd_pid(&self) -> u32 {
        self.etcd.pid()
    }

    /// Process ids of the two lifeline supervisors (apiserver's, etcd's).
    pub fn supervisor_pids(&self) -> [u32; 2] {
        [self.apiserver.supervisor_pid(), self.etcd.supervisor_pid()]
    }

    /// Whether both processes are still running.
    pub fn is_running(&self) -> bool {
        self.apiserver.is_running() && self.etcd.is_running()
    }

    /// The kube-apiserver log so far.
    pub fn apiserver_logs(&self) -> String {
        self.apiserver.logs()
    }

    /// The etcd log so far.
    pub fn etcd_logs(&self) -> String {
        self.etcd.logs()
    }

    /// How long [`Self::start`] took, from finding the binaries until the CCM's RBAC was in
    /// effect.
    pub fn startup_duration(&self) -> Duration {
        self.startup
    }

    /// Time from starting etcd until kube-apiserver's `/readyz` answered 200 (the part of
    /// [`Self::startup_duration`] spent waiting for the processes).
    pub fn time_to_readyz(&self) -> Duration {
        self.time_to_readyz
    }

    fn log_tails(&self) -> String {
        log_tails(&self.etcd, &self.apiserver)
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // The API server first, so it does not log a storm of etcd connection errors.
        self.apiserver.shutdown();
        self.etcd.shutdown();
    }
}

/// Print `note` after the message of every panic in this process (once installed, later calls
/// keep the first note): a failing test then says which Kubernetes version it ran against.
fn note_version_on_panic(note: String) {
    static NOTE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    if NOTE.set(note).is_ok() {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            if let Some(note) = NOTE.get() {
                eprintln!("{note}");
            }
            // A test that lost its API server says so, with the logs of what died (a full disk,
            // an etcd crash), instead of only a connection error.
            if let Some(Ok(shared)) = SHARED.get()
                && !shared.is_running()
            {
                eprintln!("note: the shared control plane is no longer running\n{}", shared.log_tails());
            }
        }));
    }
}

/// Build a client from a kubeconfig file (current context).
pub async fn client_from_kubeconfig(path: &Path) -> Result<Client, HarnessError> {
    let kubeconfig_error = |message: String| HarnessError::Kubeconfig { path: path.display().to_string(), message };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| kubeconfig_error(e.to_string()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| kubeconfig_error(e.to_string()))?;
    Client::try_from(config).map_err(|e| HarnessError::kube(format!("building a client from {}", path.display()), e))
}

enum StartFailure {
    /// A process could not bind its port (someone else took it after we picked it).
    PortTaken(HarnessError),
    Other(HarnessError),
}

fn kubeconfig_paths(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    (dir.join("admin.kubeconfig"), dir.join("ccm.kubeconfig"), dir.join("restricted.kubeconfig"))
}

fn log_tails(etcd: &Supervised, apiserver: &Supervised) -> String {
    format!(
        "----- etcd log (last 40 lines, {}) -----\n{}\n----- kube-apiserver log (last 60 lines, {}) -----\n{}",
        etcd.log_path().display(),
        tail_file(etcd.log_path(), 40),
        apiserver.log_path().display(),
        tail_file(apiserver.log_path(), 60),
    )
}

/// One attempt: a fresh directory, key and tokens; etcd and kube-apiserver on fresh ports;
/// kubeconfigs; wait for `/readyz`.
async fn start_once(
    assets: &Path,
    version: &ApiServerVersion,
    options: &ControlPlaneOptions,
) -> Result<ControlPlane, StartFailure> {
    let other = StartFailure::Other;
    let dir = tempfile::Builder::new()
        .prefix("harness-cp-")
        .tempdir()
        .map_err(|e| other(HarnessError::io("creating the control plane's temp dir", e)))?;
    let sa_key = dir.path().join("sa.key");
    run_checked("openssl", &["genrsa".as_ref(), "-out".as_ref(), sa_key.as_os_str(), "2048".as_ref()])
        .await
        .map_err(other)?;
    let tokens = Tokens {
        admin: random_token(),
        ccm: random_token(),
        restricted: random_token(),
        users: options.users.iter().map(|u| (u.clone(), random_token())).collect(),
    };
    let mut csv = format!(
        "{},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n{},{},ccm\n{},{RESTRICTED_USER},{RESTRICTED_USER}\n",
        tokens.admin,
        tokens.ccm,
        rbac::CCM_USER,
        tokens.restricted,
    );
    for (user, token) in &tokens.users {
        csv.push_str(&format!("{token},{},{},\"{}\"\n", user.name, user.name, user.groups.join(",")));
    }
    write(&dir.path().join("tokens.csv"), &csv).map_err(other)?;
    write(&dir.path().join(crate::audit_policy::POLICY_FILE), crate::audit_policy::AUDIT_POLICY).map_err(other)?;
    let [client_port, peer_port, apiserver_port] = free_ports().map_err(other)?;
    let spawned = Instant::now();
    let root = dir.path();
    let etcd_data = root.join("etcd");
    let cert_dir = root.join("certs");
    let client_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let address = options.address.unwrap_or(std::net::Ipv4Addr::LOCALHOST);
    let etcd_args = [
        "--name=harness".to_owned(),
        format!("--data-dir={}", etcd_data.display()),
        format!("--listen-client-urls={client_url}"),
        format!("--advertise-client-urls={client_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster=harness={peer_url}"),
        "--initial-cluster-state=new".to_owned(),
        "--logger=zap".to_owned(),
    ];
    let etcd = Supervised::spawn(
        "etcd",
        &assets.join("etcd"),
        &etcd_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[],
        &root.join("etcd.log"),
        Some(root),
    )
    .map_err(other)?;

    let mut apiserver_args = vec![
        format!("--etcd-servers={client_url}"),
        format!("--bind-address={address}"),
        format!("--advertise-address={address}"),
        format!("--secure-port={apiserver_port}"),
        format!("--cert-dir={}", cert_dir.display()),
        format!("--service-account-key-file={}", sa_key.display()),
        format!("--service-account-signing-key-file={}", sa_key.display()),
        "--service-account-issuer=https://kubernetes.default.svc".to_owned(),
        format!("--token-auth-file={}", root.join("tokens.csv").display()),
        "--authorization-mode=Node,RBAC".to_owned(),
        "--service-cluster-ip-range=10.96.0.0/16".to_owned(),
        // No Endpoints for the `kubernetes` Service: a loopback endpoint is rejected anyway.
        "--endpoint-reconciler-type=none".to_owned(),
        // Without kube-controller-manager nobody would ever remove the `not-ready` taint this
        // plugin adds to new Nodes; Nodes carry exactly the taints the test gives them.
        "--disable-admission-plugins=TaintNodesByCondition".to_owned(),
    ];
    // ServiceAccounts' requests, for tests that check what a process did (crate::audit).
    apiserver_args.extend(crate::audit_policy::apiserver_flags(root));
    let apiserver = Supervised::spawn(
        "kube-apiserver",
        &assets.join("kube-apiserver"),
        &apiserver_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[],
        &root.join("kube-apiserver.log"),
        Some(root),
    )
    .map_err(other)?;

    let paths = kubeconfig_paths(root);
    let server = format!("https://{address}:{apiserver_port}");
    let user_kubeconfigs: std::collections::BTreeMap<String, PathBuf> = tokens
        .users
        .iter()
        .map(|(user, _)| (user.name.clone(), root.join(format!("{}.kubeconfig", crate::process::sanitize(&user.name)))))
        .collect();
    let cert_file = cert_dir.join("apiserver.crt");
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut ca_seen = String::new();
    let mut client: Option<Client> = None;
    let mut last_error = "the serving certificate was not written yet".to_owned();
    loop {
        for process in [&etcd, &apiserver] {
            if !process.is_running() {
                let log = process.logs();
                let reason = format!(
                    "{} exited early ({})",
                    process.name(),
                    process.try_exit().map_or_else(|| "status unknown".to_owned(), |s| s.to_string())
                );
                let error = HarnessError::ControlPlaneNotReady { reason, detail: log_tails(&etcd, &apiserver) };
                return Err(if log.contains("address already in use") {
                    StartFailure::PortTaken(error)
                } else {
                    StartFailure::Other(error)
                });
            }
        }
        // The certificate file is written at startup; re-read it until it is complete and
        // (re)write the kubeconfigs whenever it changes.
        if let Ok(ca) = std::fs::read_to_string(&cert_file)
            && ca.trim_end().ends_with("-----END CERTIFICATE-----")
            && ca != ca_seen
        {
            let ca_data = base64(ca.as_bytes());
            for (path, user, token) in [
                (&paths.0, ADMIN_USER, &tokens.admin),
                (&paths.1, rbac::CCM_USER, &tokens.ccm),
                (&paths.2, RESTRICTED_USER, &tokens.restricted),
            ] {
                write(path, &kubeconfig(&server, &ca_data, user, token)).map_err(other)?;
            }
            for (user, token) in &tokens.users {
                if let Some(path) = user_kubeconfigs.get(&user.name) {
                    write(path, &kubeconfig(&server, &ca_data, &user.name, token)).map_err(other)?;
                }
            }
            client = Some(client_from_kubeconfig(&paths.0).await.map_err(other)?);
            ca_seen = ca;
        }
        if let Some(client) = &client {
            let request = http::Request::get("/readyz").body(Vec::new());
            match request {
                Ok(request) => match client.request_text(request).await {
                    Ok(_) => {
                        let (admin_kubeconfig, ccm_kubeconfig, restricted_kubeconfig) = paths;
                        return Ok(ControlPlane {
                            apiserver,
                            etcd,
                            dir,
                            assets: assets.to_owned(),
                            server_url: server,
                            admin_kubeconfig,
                            ccm_kubeconfig,
                            restricted_kubeconfig,
                            tokens,
                            user_kubeconfigs,
                            version: version.full.clone(),
                            startup: Duration::ZERO,
                            time_to_readyz: spawned.elapsed(),
                        });
                    }
                    Err(e) => last_error = format!("GET /readyz: {e}"),
                },
                Err(e) => last_error = format!("building the /readyz request: {e}"),
            }
        }
        if Instant::now() >= deadline {
            return Err(StartFailure::Other(HarnessError::ControlPlaneNotReady {
                reason: format!("no ready /readyz within {READY_TIMEOUT:?}; last error: {last_error}"),
                detail: log_tails(&etcd, &apiserver),
            }));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Three distinct free TCP ports on 127.0.0.1 (free when we looked: another process may take
/// one before we bind it, which [`ControlPlane::start`] handles by retrying).
fn free_ports() -> Result<[u16; 3], HarnessError> {
    let bind = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| HarnessError::io("binding 127.0.0.1:0 to find a free port", e))
    };
    // Hold all three at once so they are distinct.
    let listeners = [bind()?, bind()?, bind()?];
    let mut ports = [0u16; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr().map_err(|e| HarnessError::io("reading a bound port", e))?.port();
    }
    Ok(ports)
}

fn write(path: &Path, contents: &str) -> Result<(), HarnessError> {
    std::fs::write(path, contents).map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))
}

fn random_token() -> String {
    std::iter::repeat_with(fastrand::alphanumeric).take(40).collect()
}

/// Whether a process exists and is not a zombie (re-exported for tests about cleanup).
pub fn process_alive(pid: u32) -> bool {
    pid_alive(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct() {
        let ports = free_ports().unwrap_or_default();
        assert!(ports.iter().all(|p| *p != 0));
        assert_ne!(ports[0], ports[1]);
        assert_ne!(ports[1], ports[2]);
        assert_ne!(ports[0], ports[2]);
    }
}
