//! What a lab keeps for a look after a failure: while it runs, a [`Recorder`] writes every
//! Event of the cluster (the suites delete a test's namespace, and its Events with it, when the
//! test ends), each change of a Node's conditions and taints, and the machine's load every 15 s;
//! when a test fails, [`keep`] copies these, every daemon's log (each node's kubelet, containerd
//! and kube-proxy, the controllers, CoreDNS, kube-apiserver, etcd), the CCM's and the suites'
//! logs and a last look through kubectl into `<target dir>/e2e-suites-logs/<ccm>-<UTC time>/`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use super::lab::SuitesLab;

/// How often the machine's load and the Nodes are looked at.
const SAMPLE_EVERY: Duration = Duration::from_secs(15);
/// How often the Nodes' conditions and taints are compared with the last look.
const NODES_EVERY: Duration = Duration::from_secs(5);

/// Records a lab's Events, Node changes and the machine's load into files of a temporary
/// directory while it lives; [`keep`] copies them. Dropping it stops the recording.
pub struct Recorder {
    dir: tempfile::TempDir,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Recorder {
    pub fn start(client: kube::Client) -> Recorder {
        let dir = tempfile::Builder::new().prefix("hcloud-ccm-e2e-record-").tempdir().expect("a temp dir");
        let events = appender(dir.path().join("events.log"));
        let api: Api<Event> = Api::all(client.clone());
        let watch = async move {
            let mut stream =
                std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff().applied_objects());
            while let Some(item) = stream.next().await {
                match item {
                    Ok(event) => events(&event_line(&event)),
                    Err(e) => events(&format!("{} (watching Events: {e})", clock(SystemTime::now()))),
                }
            }
        };
        let nodes_log = appender(dir.path().join("nodes.log"));
        let nodes: Api<Node> = Api::all(client);
        let look_at_nodes = async move {
            let mut last = String::new();
            loop {
                if let Ok(list) = nodes.list(&Default::default()).await {
                    let now: String = list.items.iter().map(node_line).collect::<Vec<_>>().join("\n");
                    if now != last {
                        nodes_log(&format!("{}\n{now}", clock(SystemTime::now())));
                        last = now;
                    }
                }
                tokio::time::sleep(NODES_EVERY).await;
            }
        };
        let host = appender(dir.path().join("host.log"));
        let sample = async move {
            loop {
                host(&tokio::task::spawn_blocking(host_line).await.unwrap_or_default());
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
        };
        let tasks = vec![tokio::spawn(watch), tokio::spawn(look_at_nodes), tokio::spawn(sample)];
        Recorder { dir, tasks }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A function appending a line to `path`.
fn appender(path: PathBuf) -> impl Fn(&str) + Send + 'static {
    move |line: &str| {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&path);
        if let Ok(mut file) = file {
            let _ = writeln!(file, "{line}");
        }
    }
}

/// `HH:MM:SS` (UTC) of `t`: the suites' logs use UTC too.
pub fn clock(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60)
}

/// One Event as a line: when (UTC), type, namespace/kind/name, reason, count, source, message.
pub fn event_line(e: &Event) -> String {
    let when = e
        .last_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()))
        .unwrap_or_default();
    let o = &e.involved_object;
    let source = e
        .source
        .as_ref()
        .map(|s| [s.component.as_deref(), s.host.as_deref()].into_iter().flatten().collect::<Vec<_>>().join("@"))
        .filter(|s| !s.is_empty())
        .or_else(|| e.reporting_component.clone())
        .unwrap_or_default();
    format!(
        "{when} {} {}/{}/{} {} x{} [{source}] {}",
        e.type_.as_deref().unwrap_or("-"),
        o.namespace.as_deref().unwrap_or("-"),
        o.kind.as_deref().unwrap_or("-"),
        o.name.as_deref().unwrap_or("-"),
        e.reason.as_deref().unwrap_or("-"),
        e.count.unwrap_or(1),
        e.message.as_deref().unwrap_or("").replace('\n', " "),
    )
}

/// A Node's name, its conditions (`Type=Status`) and its taints, as a line.
pub fn node_line(n: &Node) -> String {
    let name = n.metadata.name.as_deref().unwrap_or("-");
    let mut line = format!("  {name}:");
    for c in n.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten() {
        let _ = write!(line, " {}={}", c.type_, c.status);
    }
    let taints: Vec<String> = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    let _ = write!(line, " taints=[{}]", taints.join(","));
    line
}

/// The machine's load now: load average, CPU and I/O pressure (10 s averages), available
/// memory, free space where the lab's files are.
fn host_line() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let load: Vec<String> = read("/proc/loadavg").split_whitespace().take(4).map(str::to_owned).collect();
    let pressure = |p: &str| read(p).lines().next().and_then(|l| l.split_whitespace().nth(1)).unwrap_or("-").to_owned();
    let available = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:").map(|v| v.trim().to_owned()))
        .unwrap_or_default();
    let df = std::process::Command::new("df")
        .args(["-Pk", &std::env::temp_dir().display().to_string()])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().nth(1).unwrap_or_default().to_owned())
        .unwrap_or_default();
    let free = df.split_whitespace().nth(3).and_then(|k| k.parse::<u64>().ok()).map(|k| k / 1024 / 1024);
    format!(
        "{} load {} | cpu {} | io {} | memory available {available} | {} free {} GiB",
        clock(SystemTime::now()),
        load.join(" "),
        pressure("/proc/pressure/cpu"),
        pressure("/proc/pressure/io"),
        std::env::temp_dir().display(),
        free.map_or("-".to_owned(), |f| f.to_string()),
    )
}

/// Where the logs of a failed run go: `<target dir>/e2e-suites-logs/<run>/`.
pub fn logs_dir(target_tmp: &Path, run: &str) -> PathBuf {
    target_tmp.parent().unwrap_or(target_tmp).join("e2e-suites-logs").join(run)
}

/// Copies everything the lab has for a look (module docs) and `texts` (file name, contents: the
/// suites' logs) into a new directory for `run`, and returns it.
pub fn keep(lab: &SuitesLab, run: &str, texts: &[(&str, &str)]) -> PathBuf {
    let stamp = test_harness::utc_stamp(SystemTime::now());
    let dir = logs_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), &format!("{run}-{stamp}"));
    if let Err(e) = lab.lab.save_logs(&dir) {
        eprintln!("keeping the lab's logs: {e}");
    }
    let write = |name: &str, text: &str| {
        if let Err(e) = std::fs::write(dir.join(name), text) {
            eprintln!("keeping {name}: {e}");
        }
    };
    write("ccm.log", &lab.ccm.logs());
    for (name, text) in texts {
        write(name, text);
    }
    for name in ["events.log", "nodes.log", "host.log"] {
        write(name, &std::fs::read_to_string(lab.recorder.dir.path().join(name)).unwrap_or_default());
    }
    let cp = lab.lab.control_plane();
    let kubectl = cp.kubectl_path();
    let kubeconfig = format!("--kubeconfig={}", cp.admin_kubeconfig().display());
    let looks: [(&str, &[&str]); 4] = [
        ("nodes.txt", &["describe", "nodes"]),
        ("pods.txt", &["get", "pods", "-A", "-o", "wide"]),
        ("kubectl-events.txt", &["get", "events", "-A", "--sort-by=.lastTimestamp"]),
        ("deployments.txt", &["get", "deployments,daemonsets,replicasets", "-A", "-o", "wide"]),
    ];
    for (name, args) in looks {
        let out = std::process::Command::new(&kubectl)
            .arg(&kubeconfig)
            .arg("--request-timeout=20s")
            .args(args)
            .stdin(std::process::Stdio::null())
            .output();
        let text = match out {
            Ok(o) => format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
            Err(e) => format!("kubectl: {e}"),
        };
        write(name, &text);
    }
    eprintln!("the lab's logs are kept in {}", dir.display());
    dir
}

#[test]
fn kept_logs_go_under_the_target_dir() {
    let dir = logs_dir(Path::new("/work/t/tmp"), "hcloud-ccm-2026_11_28_16_00_00");
    assert_eq!(dir, Path::new("/work/t/e2e-suites-logs/hcloud-ccm-2026_11_28_16_00_00"));
}

#[test]
fn the_clock_is_utc_time_of_day() {
    // 2026-11-27T10:04:05Z
    assert_eq!(clock(UNIX_EPOCH + Duration::from_secs(1_795_773_845)), "10:04:05");
}

#[test]
fn an_event_is_one_line_with_what_it_is_about() {
    let event: Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web.1", "namespace": "esipp-1"},
        "involvedObject": {"kind": "Pod", "namespace": "esipp-1", "name": "web-abc"},
        "type": "Warning",
        "reason": "FailedScheduling",
        "count": 3,
        "lastTimestamp": "2026-11-28T13:20:00Z",
        "source": {"component": "default-scheduler"},
        "message": "0/3 nodes are available:\n3 node(s) had untolerated taint."
    }))
    .unwrap();
    assert_eq!(
        event_line(&event),
        "2026-11-28T13:20:00Z Warning esipp-1/Pod/web-abc FailedScheduling x3 [default-scheduler] \
         0/3 nodes are available: 3 node(s) had untolerated taint."
    );
}

#[test]
fn a_node_line_has_its_conditions_and_taints() {
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "hccm-e2e-worker-0"},
        "spec": {"taints": [{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]},
        "status": {"conditions": [
            {"type": "NetworkUnavailable", "status": "True"},
            {"type": "Ready", "status": "True"}
        ]}
    }))
    .unwrap();
    assert_eq!(
        node_line(&node),
        "  hccm-e2e-worker-0: NetworkUnavailable=True Ready=True taints=[node.kubernetes.io/network-unavailable:NoSchedule]"
    );
}
