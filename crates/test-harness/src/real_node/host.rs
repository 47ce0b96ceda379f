//! What a lab changes on the host, and how it is undone: the bridge, one network namespace per
//! node (veth, address, default route, routes to the other nodes' pods), one cgroup root per
//! node in every cgroup v1 hierarchy, and the teardown script that removes all of it.
//!
//! The teardown is a shell script written before anything is created, so it also runs when the
//! test process dies: a lifeline process ([`crate::ChildProcess`]) runs it on SIGTERM, and the
//! next lab runs the script of any lab whose owner process is gone.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use super::plan::LabPlan;
use crate::assets::run_checked;
use crate::error::HarnessError;

/// The kernel settings kubelet changes host-wide (unless `protectKernelDefaults`); the teardown
/// puts back the values they had when the lab started.
pub(super) const KUBELET_SYSCTLS: [&str; 3] = ["vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops"];

/// Run `program args` and fail with its stderr.
pub(super) async fn run(program: &str, args: &[&str]) -> Result<String, HarnessError> {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    run_checked(program, &args).await
}

/// Run `program args` inside the network namespace `netns` (`nsenter --net`, which, unlike
/// `ip netns exec`, keeps the host's mounts: kubelet's volumes must be visible to containerd).
pub(super) async fn run_in(netns: &str, program: &str, args: &[&str]) -> Result<String, HarnessError> {
    let net = format!("--net=/run/netns/{netns}");
    let mut all = vec![net.as_str(), "--", program];
    all.extend_from_slice(args);
    run("nsenter", &all).await
}

/// The cgroup v1 hierarchies mounted under `/sys/fs/cgroup` (cgroup2's `unified` left out).
pub(super) fn cgroup_v1_hierarchies() -> Result<Vec<PathBuf>, HarnessError> {
    let mounts =
        std::fs::read_to_string("/proc/self/mounts").map_err(|e| HarnessError::io("reading /proc/self/mounts", e))?;
    let hierarchies: Vec<PathBuf> = mounts
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let (_, target, fstype) = (fields.next()?, fields.next()?, fields.next()?);
            (fstype == "cgroup" && target.starts_with("/sys/fs/cgroup/")).then(|| PathBuf::from(target))
        })
        .collect();
    if hierarchies.is_empty() {
        return Err(HarnessError::NodeLab {
            step: "checking the host".to_owned(),
            detail: "no cgroup v1 hierarchy is mounted under /sys/fs/cgroup; the lab's kubelets run with \
                     cgroupfs on cgroup v1 (this machine's kernel), a cgroup v2-only host needs another recipe"
                .to_owned(),
        });
    }
    Ok(hierarchies)
}

/// Create every node's cgroup root in every hierarchy (cpuset roots get their parent's CPUs and
/// memory nodes, or no task could join them).
pub(super) fn create_cgroups(plan: &LabPlan) -> Result<(), HarnessError> {
    let io = |what: String| move |e| HarnessError::io(what, e);
    for hierarchy in cgroup_v1_hierarchies()? {
        for node in &plan.nodes {
            let dir = hierarchy.join(&node.cgroup);
            std::fs::create_dir_all(&dir).map_err(io(format!("creating the cgroup {}", dir.display())))?;
            if hierarchy.ends_with("cpuset") {
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    let value = std::fs::read_to_string(hierarchy.join(file))
                        .map_err(io(format!("reading {}/{file}", hierarchy.display())))?;
                    std::fs::write(dir.join(file), value.trim())
                        .map_err(io(format!("writing {}/{file}", dir.display())))?;
                }
            }
        }
    }
    Ok(())
}

/// The bridge (host end `.1` of both subnets, and the Load Balancer addresses), and per node:
/// namespace, veth, its private and public address, loopback, default route via the host,
/// forwarding on (the CNI bridge routes pods), and a route to each other node's pods via that
/// node.
pub(super) async fn create_network(plan: &LabPlan) -> Result<(), HarnessError> {
    let host_cidr = format!("{}/{}", plan.host_ip(), plan.subnet.prefix_len());
    let host_public = format!("{}/{}", plan.host_public_ip(), plan.public_subnet.prefix_len());
    run("ip", &["link", "add", &plan.bridge, "type", "bridge"]).await?;
    run("ip", &["addr", "add", &host_cidr, "dev", &plan.bridge]).await?;
    run("ip", &["addr", "add", &host_public, "dev", &plan.bridge]).await?;
    let batch: String =
        plan.load_balancer_ips().iter().map(|ip| format!("addr add {ip}/32 dev {}\n", plan.bridge)).collect();
    run_batch(&batch).await?;
    run("ip", &["link", "set", &plan.bridge, "up"]).await?;
    let host_ip = plan.host_ip().to_string();
    for node in &plan.nodes {
        run("ip", &["netns", "add", &node.netns]).await?;
        run("ip", &["link", "add", &node.veth, "type", "veth", "peer", "name", "eth0", "netns", &node.netns]).await?;
        run("ip", &["link", "set", &node.veth, "master", &plan.bridge, "up"]).await?;
        let node_cidr = format!("{}/{}", node.ip, plan.subnet.prefix_len());
        let public_cidr = format!("{}/{}", node.public_ip, plan.public_subnet.prefix_len());
        run_in(&node.netns, "ip", &["link", "set", "lo", "up"]).await?;
        run_in(&node.netns, "ip", &["addr", "add", &node_cidr, "dev", "eth0"]).await?;
        run_in(&node.netns, "ip", &["addr", "add", &public_cidr, "dev", "eth0"]).await?;
        run_in(&node.netns, "ip", &["link", "set", "eth0", "up"]).await?;
        run_in(&node.netns, "ip", &["route", "add", "default", "via", &host_ip]).await?;
        run_in(&node.netns, "sysctl", &["-q", "-w", "net.ipv4.ip_forward=1"]).await?;
        let rules = plan.run_dir.join(format!("{}.nft", node.netns));
        std::fs::write(&rules, super::plan::masquerade_rules())
            .map_err(|e| HarnessError::io(format!("writing {}", rules.display()), e))?;
        run_in(&node.netns, "nft", &["-f", &rules.display().to_string()]).await?;
        for other in plan.nodes.iter().filter(|o| o.name != node.name) {
            let (cidr, via) = (other.pod_cidr.to_string(), other.ip.to_string());
            run_in(&node.netns, "ip", &["route", "add", &cidr, "via", &via]).await?;
        }
    }
    Ok(())
}

/// `ip -batch -` with `commands` on its standard input (one `ip` for many addresses).
async fn run_batch(commands: &str) -> Result<(), HarnessError> {
    use tokio::io::AsyncWriteExt as _;
    let mut child = tokio::process::Command::new("ip")
        .args(["-batch", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| HarnessError::io("starting ip -batch", e))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(commands.as_bytes()).await.map_err(|e| HarnessError::io("writing to ip -batch", e))?;
    }
    let out = child.wait_with_output().await.map_err(|e| HarnessError::io("waiting for ip -batch", e))?;
    if !out.status.success() {
        return Err(HarnessError::Command {
            command: "ip -batch -".to_owned(),
            detail: format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    Ok(())
}

/// Whether some interface of the host already has an address in the lab's subnets (another
/// lab, or anything else): the lab then picks another tag.
pub(super) async fn subnet_in_use(plan: &LabPlan) -> Result<bool, HarnessError> {
    let out = run("ip", &["-4", "-o", "addr", "show"]).await?;
    Ok(out
        .split_whitespace()
        .filter_map(|w| w.split('/').next()?.parse::<Ipv4Addr>().ok())
        .any(|ip| plan.subnet.contains(&ip) || plan.public_subnet.contains(&ip)))
}

/// The teardown script of a lab: kill everything started for its nodes (daemons, shims,
/// containers: by path and by cgroup), unmount what they mounted, delete namespaces, bridge
/// and cgroups, put back kubelet's kernel settings, remove the directories. Idempotent.
pub(super) fn teardown_script(plan: &LabPlan, sysctls: &[(String, String)]) -> String {
    let tag = &plan.tag;
    let netns: Vec<&str> = plan.nodes.iter().map(|n| n.netns.as_str()).collect();
    let restore: Vec<String> = sysctls.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        r#"#!/usr/bin/env bash
# Teardown of the node lab {tag} (written by test-harness, real_node); safe to run twice.
tag={tag}
{kill}
for ns in {netns}; do ip netns del "$ns" 2>/dev/null; done
ip link del hb$tag 2>/dev/null
for root in /sys/fs/cgroup/*/hccm-$tag-*; do
  [[ -d $root ]] && find "$root" -depth -type d -exec rmdir {{}} + 2>/dev/null
done
{restore}
rm -rf /var/lib/hccm-$tag /run/hccm-$tag
true
"#,
        kill = kill_script(&format!("hccm-{tag}/n"), &format!("hccm-{tag}-*"), &format!("hccm-{tag}")),
        netns = netns.join(" "),
        restore = if restore.is_empty() { String::new() } else { format!("sysctl -q -w {}", restore.join(" ")) },
    )
}

/// Shell lines that kill every process whose command line contains `pattern` (daemons and
/// containerd's shims, by their paths) or that is in a cgroup matching `cgroups` under any
/// hierarchy (the containers), then lazily unmount every mount whose path contains `mounts`.
pub(super) fn kill_script(pattern: &str, cgroups: &str, mounts: &str) -> String {
    // `[h]ccm-...`: the pattern must not match the command line of the shell running it.
    let pattern = match pattern.char_indices().nth(1) {
        Some((i, _)) => format!("[{}]{}", &pattern[..i], &pattern[i..]),
        None => pattern.to_owned(),
    };
    format!(
        r#"for _ in 1 2 3 4 5 6 7 8 9 10; do
  pids=$(pgrep -f "{pattern}" || true)
  for procs in /sys/fs/cgroup/*/{cgroups}; do
    [[ -d $procs ]] && pids="$pids $(find "$procs" -name cgroup.procs -exec cat {{}} + 2>/dev/null)"
  done
  pids=$(printf '%s\n' $pids | grep -vx "$$" | sort -u)
  [[ -z "$pids" ]] && break
  # shellcheck disable=SC2086
  kill -9 $pids 2>/dev/null
  sleep 0.2
done
grep "{mounts}" /proc/self/mountinfo | awk '{{print $5}}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done"#
    )
}

/// What of a lab is still there: processes, mounts, namespaces, the bridge, cgroups,
/// directories (empty after a teardown).
pub(super) async fn leftovers(plan: &LabPlan) -> Vec<String> {
    // Killed processes take a moment to be reaped: look again for a few seconds.
    let mut left = Vec::new();
    for _ in 0..25 {
        left = leftovers_now(plan).await;
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    left
}

async fn leftovers_now(plan: &LabPlan) -> Vec<String> {
    let mut left = Vec::new();
    let tag = &plan.tag;
    if let Ok(procs) = run("sh", &["-c", &format!("pgrep -af '[h]ccm-{tag}/' || true")]).await
        && !procs.trim().is_empty()
    {
        left.push(format!("processes: {}", procs.trim()));
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mounted: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .filter(|m| m.contains(&format!("hccm-{tag}")))
        .collect();
    if !mounted.is_empty() {
        left.push(format!("mounts {mounted:?}"));
    }
    let mut paths: Vec<PathBuf> =
        vec![plan.run_dir.clone(), plan.data_dir.clone(), PathBuf::from("/sys/class/net").join(&plan.bridge)];
    paths.extend(plan.nodes.iter().map(|n| PathBuf::from("/run/netns").join(&n.netns)));
    if let Ok(hierarchies) = cgroup_v1_hierarchies() {
        paths.extend(hierarchies.iter().flat_map(|h| plan.nodes.iter().map(move |n| h.join(&n.cgroup))));
    }
    left.extend(paths.into_iter().filter(|p| p.exists()).map(|p| p.display().to_string()));
    left
}

/// The current values of [`KUBELET_SYSCTLS`].
pub(super) async fn read_sysctls() -> Result<Vec<(String, String)>, HarnessError> {
    let mut values = Vec::new();
    for key in KUBELET_SYSCTLS {
        let value = run("sysctl", &["-n", key]).await?;
        values.push((key.to_owned(), value.trim().to_owned()));
    }
    Ok(values)
}

/// Run the teardown script of every lab whose owner process is gone (a test binary that was
/// killed before its lifeline could run it, e.g. by SIGKILL of the whole process group).
pub(super) fn sweep_stale_labs() {
    let Ok(entries) = std::fs::read_dir("/run") else { return };
    for entry in entries.flatten() {
        let dir = entry.path();
        let is_lab = dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("hccm-"));
        if !is_lab {
            continue;
        }
        let owner = std::fs::read_to_string(dir.join("owner")).ok().and_then(|s| s.trim().parse::<u32>().ok());
        if owner.is_some_and(crate::lifeline::pid_alive) {
            continue;
        }
        tracing::warn!(lab = %dir.display(), "removing a node lab whose test process is gone");
        run_teardown_blocking(&dir.join("teardown.sh"));
    }
}

/// Run a teardown script and wait for it (used from `Drop`, so it blocks).
pub(super) fn run_teardown_blocking(script: &Path) {
    if !script.exists() {
        return;
    }
    match std::process::Command::new("bash").arg(script).stdin(std::process::Stdio::null()).output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => tracing::warn!(
            script = %script.display(),
            "teardown exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => tracing::warn!(script = %script.display(), "could not run the teardown: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_teardown_names_the_labs_namespaces_and_restores_the_kernel_settings() {
        let plan = LabPlan::new("00aa11", &["a", "b"]).unwrap();
        let script = teardown_script(&plan, &[("kernel.panic".to_owned(), "0".to_owned())]);
        assert!(script.contains("for ns in hccm-00aa11-0 hccm-00aa11-1; do"), "{script}");
        assert!(script.contains("sysctl -q -w kernel.panic=0\n"), "{script}");
        assert!(script.contains("rm -rf /var/lib/hccm-$tag /run/hccm-$tag\n"), "{script}");
        // The script lives at /run/hccm-<tag>/teardown.sh: the pattern of what it kills must not
        // match its own command line.
        assert!(!"/run/hccm-00aa11/teardown.sh".contains("hccm-00aa11/n"));
    }
}
