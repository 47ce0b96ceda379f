//! End to end: the container image, booted. `scripts/build-image` builds it (release binary,
//! a base assembled from Debian's packages, `deploy/Containerfile`, podman) when it is missing or
//! older than the release binary's sources; these tests then run it with podman as a cluster
//! would: host network, read-only root filesystem, every capability dropped, the image's own
//! user, the token from a mounted file. Without podman or the image they FAIL, never skip
//! (`.ci/run` installs podman and builds the image first).
//!
//! - [`the_image_boots_and_serves_a_node_a_load_balancer_and_healthz`]: against the real control
//!   plane and the Hetzner fake, the containerised CCM initializes a Node, gives a LoadBalancer
//!   Service its Load Balancer, answers `/healthz` on both listeners, runs as 65532 on a
//!   read-only root and exits 0 on SIGTERM, leaving no container behind.
//! - [`the_image_is_configured_like_the_official_one_and_has_no_shell`]: entrypoint, user,
//!   ports, the official binary path, `--version`, and no `/bin/sh`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::lb::{fresh_namespace, ingress, lb_service, target_servers, wait_lb};
use common::{Env, REACT, free_port};
use hcloud_fake::FakeConfig;
use hcloud_fake::control::SeedServer;
use k8s_openapi::api::core::v1::Service;
use kube::api::PostParams;
use test_harness::{ChildProcess, NodeBuilder, provisioned_path, unique_name, wait_for, wait_until};

/// The image `scripts/build-image` tags: `v` + the crate version (as the chart's default tag).
const IMAGE: &str = concat!("localhost/hcloud-ccm:v", env!("CARGO_PKG_VERSION"));
/// The label naming the test process that started a container (stale ones are removed).
const OWNER_LABEL: &str = "io.github.hcloud-ccm.e2e-owner";
/// The user of the image (distroless' nonroot).
const NONROOT: u32 = 65532;

/// podman configured for the image (the wrapper `scripts/build-image` writes), once the image
/// is current: built by the script if needed.
fn podman() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/build-image");
    provisioned_path(&script, "HCLOUD_CCM_PODMAN").unwrap_or_else(|e| {
        panic!("{e}. The image tests need root (scripts/build-image installs podman and runc) and do not skip.")
    })
}

fn run(podman: &Path, args: &[&str]) -> Output {
    Command::new(podman).args(args).output().unwrap_or_else(|e| panic!("podman {args:?}: {e}"))
}

fn stdout_of(podman: &Path, args: &[&str]) -> String {
    let out = run(podman, args);
    assert!(out.status.success(), "podman {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A container of this test: removed (with `podman rm -f`) when dropped, even if `podman run`
/// was killed before it could remove it.
struct Container<'a> {
    podman: &'a Path,
    name: String,
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = run(self.podman, &["rm", "--force", "--time=0", "--ignore", &self.name]);
    }
}

/// Removes containers left by test processes that no longer run (a test killed with SIGKILL
/// cannot remove its own).
fn remove_stale_containers(podman: &Path) {
    let format = format!("{{{{.Names}}}} {{{{index .Labels \"{OWNER_LABEL}\"}}}}");
    let listed = stdout_of(podman, &["ps", "--all", "--filter", &format!("label={OWNER_LABEL}"), "--format", &format]);
    for line in listed.lines() {
        if let Some((name, pid)) = line.split_once(' ')
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = run(podman, &["rm", "--force", "--time=0", "--ignore", name]);
        }
    }
}

/// A copy of `contents` readable only by the image's user, as a Secret volume would give it.
fn private_file(dir: &Path, name: &str, contents: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write");
    chown(&path, Some(NONROOT), Some(NONROOT)).expect("chown (the test runs as root, as podman does)");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).expect("chmod");
    path
}

#[tokio::test]
async fn the_image_boots_and_serves_a_node_a_load_balancer_and_healthz() {
    let podman = podman();
    remove_stale_containers(&podman);
    let env = Env::start(FakeConfig::default()).await;
    let h = env.fake.handle();
    let (_ns, services) = fresh_namespace(&env).await;
    let server = h.seed_server(&SeedServer::new("img-node")).expect("server");

    let files = tempfile::tempdir().expect("tempdir");
    let token = private_file(files.path(), "token", format!("{}\n", common::TOKEN).as_bytes());
    let kubeconfig = private_file(files.path(), "kubeconfig", &std::fs::read(env.cp.ccm_kubeconfig()).expect("read"));
    let (plain, secure) = (free_port(), free_port());
    let name = unique_name("hcloud-ccm-image");
    let container = Container { podman: &podman, name: name.clone() };
    let mounts = [
        format!("--volume={}:/etc/hcloud/token:ro", token.display()),
        format!("--volume={}:/etc/kubernetes/ccm.kubeconfig:ro", kubeconfig.display()),
    ];
    let envs = [
        "--env=HCLOUD_TOKEN_FILE=/etc/hcloud/token".to_owned(),
        format!("--env=HCLOUD_ENDPOINT={}", env.fake.base_url()),
        format!("--env=HCLOUD_METRICS_ADDRESS=127.0.0.1:{plain}"),
        "--env=HCLOUD_LOAD_BALANCERS_LOCATION=fsn1".to_owned(),
    ];
    let (owner, secure_port) =
        (format!("--label={OWNER_LABEL}={}", std::process::id()), format!("--secure-port={secure}"));
    let mut args = vec!["run", "--rm", "--name", &name, &owner, "--network=host", "--read-only", "--cap-drop=all"];
    args.extend(["--security-opt=no-new-privileges", "--pull=never"]);
    args.extend(mounts.iter().chain(&envs).map(String::as_str));
    args.extend([IMAGE, "--cloud-provider=hcloud", "--allow-untagged-cloud", "--leader-elect=false"]);
    args.extend(["--kubeconfig=/etc/kubernetes/ccm.kubeconfig", "--bind-address=127.0.0.1", &secure_port]);
    args.extend(["--node-monitor-period=1s", "--v=2"]);
    let ccm = ChildProcess::spawn(&podman, &args, &[], "hcloud-ccm-image").expect("podman runs");
    ccm.wait_for_log("hcloud-ccm started", REACT).await.unwrap_or_else(|e| panic!("{e}\n{}", ccm.logs()));

    // The process in the container: the image's user, on a read-only root.
    let pid = stdout_of(&podman, &["inspect", "--format", "{{.State.Pid}}", &name]);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status of the container's process");
    let uids = status.lines().find_map(|l| l.strip_prefix("Uid:")).expect("Uid line");
    assert_eq!(uids.split_whitespace().collect::<Vec<_>>(), ["65532"; 4], "real, effective, saved, fs uid");
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("exe");
    assert_eq!(exe, Path::new("/bin/hcloud-ccm"));
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).expect("mountinfo");
    let root = mountinfo.lines().find(|l| l.split(' ').nth(4) == Some("/")).expect("the root mount");
    let options = root.split(' ').nth(5).expect("mount options");
    assert!(options.split(',').any(|o| o == "ro"), "the root is mounted {options}: {root}");

    // A Node is initialized.
    NodeBuilder::new("img-node").register(&env.client).await.expect("node");
    let node = wait_for(&env.nodes, "img-node", REACT, "initialized", |n| n.is_some_and(|n| !common::tainted(n)))
        .await
        .expect("initialized")
        .expect("node");
    assert_eq!(node.spec.and_then(|s| s.provider_id), Some(format!("hcloud://{server}")));

    // A LoadBalancer Service gets a Load Balancer targeting the Node, and its address.
    let svc = services.create(&PostParams::default(), &lb_service("web", &[], &[80])).await.expect("service");
    let lb = wait_lb(&h, &svc, "a Load Balancer targeting the node", |l| target_servers(l) == [server]).await;
    assert_eq!(lb.location.name, "fsn1", "HCLOUD_LOAD_BALANCERS_LOCATION reached the container");
    let svc: Service = wait_for(&services, "web", REACT, "an ingress", |s| s.is_some_and(|s| !ingress(s).is_empty()))
        .await
        .expect("ingress")
        .expect("service");
    assert_eq!(ingress(&svc)[0].0, lb.public_net.ipv4.ip.clone().expect("ipv4"));

    // /healthz on the plain metrics listener and on the secure port.
    let https = reqwest::Client::builder().tls_danger_accept_invalid_certs(true).build().expect("client");
    for url in [format!("http://127.0.0.1:{plain}/healthz"), format!("https://127.0.0.1:{secure}/healthz")] {
        let response = https.get(&url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert_eq!(response.status().as_u16(), 200, "{url}");
        assert_eq!(response.text().await.expect("body"), "ok", "{url}");
    }

    // SIGTERM reaches the CCM through podman; it exits cleanly and the container is removed.
    let status = ccm.stop().await.expect("stops");
    assert_eq!(status.code(), Some(0), "{}", ccm.logs());
    wait_until(REACT, "podman removed the container", async || {
        !run(&podman, &["container", "exists", &name]).status.success()
    })
    .await
    .expect("removed");
    drop(container);
}

#[test]
fn the_image_is_configured_like_the_official_one_and_has_no_shell() {
    let podman = podman();
    let inspect = |format: &str| stdout_of(&podman, &["image", "inspect", "--format", format, IMAGE]);
    assert_eq!(inspect("{{json .Config.Entrypoint}}"), r#"["/bin/hcloud-ccm"]"#);
    assert_eq!(inspect("{{.Config.User}}"), "65532:65532");
    let mut ports: Vec<String> = inspect("{{range $p, $_ := .Config.ExposedPorts}}{{$p}} {{end}}")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    ports.sort();
    assert_eq!(ports, ["10258/tcp", "8233/tcp"]);

    // Both paths run the binary, which names its version, commit and build date.
    for entrypoint in ["/bin/hcloud-ccm", "/bin/hcloud-cloud-controller-manager"] {
        let version = stdout_of(
            &podman,
            &[
                "run",
                "--rm",
                "--network=none",
                "--read-only",
                "--pull=never",
                "--entrypoint",
                entrypoint,
                IMAGE,
                "--version",
            ],
        );
        // The commit of this checkout (build.rs reruns when HEAD moves), not merely a commit:
        // an image of an older commit is stale even when no source file changed.
        let prefix = concat!(
            "hcloud-ccm ",
            env!("CARGO_PKG_VERSION"),
            " (commit ",
            env!("HCLOUD_CCM_VERSION_COMMIT"),
            ", built "
        );
        assert!(version.starts_with(prefix), "{entrypoint}: {version}, expected it to start with {prefix}");
    }
    // No shell to exec into.
    let shell = run(
        &podman,
        &["run", "--rm", "--network=none", "--pull=never", "--entrypoint", "/bin/sh", IMAGE, "-c", "true"],
    );
    assert!(!shell.status.success(), "the image has /bin/sh");
    let stderr = String::from_utf8_lossy(&shell.stderr);
    assert!(stderr.contains("no such file or directory"), "{stderr}");
}
