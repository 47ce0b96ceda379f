//! The control plane's binaries: where kube-apiserver, etcd and kubectl come from
//! (`$KUBEBUILDER_ASSETS` or `scripts/provision-control-plane`) and which API server version
//! they are.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::error::HarnessError;

/// The directory with kube-apiserver, etcd and kubectl: `$KUBEBUILDER_ASSETS`, or what
/// `scripts/provision-control-plane` prints (building the binaries on first use).
pub async fn find_assets() -> Result<PathBuf, HarnessError> {
    if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        check_assets(&dir, "KUBEBUILDER_ASSETS")?;
        return Ok(dir);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/provision-control-plane");
    let output = tokio::process::Command::new(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Progress (and a cold build takes minutes) goes straight to the terminal.
        .stderr(Stdio::inherit())
        .output()
        .await
        .map_err(|e| HarnessError::io(format!("running {}", script.display()), e))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(HarnessError::Assets(format!(
            "{} failed ({}); see its messages above. stdout:\n{stdout}",
            script.display(),
            output.status
        )));
    }
    let dir = stdout
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .and_then(|line| line.trim().strip_prefix("KUBEBUILDER_ASSETS="))
        .ok_or_else(|| {
            HarnessError::Assets(format!(
                "{} did not print KUBEBUILDER_ASSETS=<dir> as its last line; stdout:\n{stdout}",
                script.display()
            ))
        })?;
    let dir = PathBuf::from(dir);
    check_assets(&dir, &script.display().to_string())?;
    Ok(dir)
}

fn check_assets(dir: &Path, origin: &str) -> Result<(), HarnessError> {
    for binary in ["kube-apiserver", "etcd", "kubectl"] {
        if !dir.join(binary).is_file() {
            return Err(HarnessError::Assets(format!("{} (from {origin}) has no {binary}", dir.display())));
        }
    }
    Ok(())
}

/// The version of the API server binary, as `kube-apiserver --version` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiServerVersion {
    /// The full version, e.g. `v1.37.2`.
    pub(crate) full: String,
    /// The minor version, e.g. 36.
    pub(crate) minor: u32,
}

/// Parse `Kubernetes v1.37.2` (the output of `kube-apiserver --version`).
fn parse_version(output: &str) -> Option<ApiServerVersion> {
    let full = output.split_whitespace().find(|word| word.starts_with("v1."))?;
    let minor = full.strip_prefix("v1.")?.split(['.', '-', '+']).next()?.parse().ok()?;
    Some(ApiServerVersion { full: full.to_owned(), minor })
}

/// The version of the API server binary in `assets`.
pub(crate) async fn apiserver_version(assets: &Path) -> Result<ApiServerVersion, HarnessError> {
    let output = run_checked(&assets.join("kube-apiserver"), &["--version".as_ref()]).await?;
    parse_version(&output)
        .ok_or_else(|| HarnessError::Assets(format!("unexpected kube-apiserver --version output: {output:?}")))
}

/// The variable that picks the Kubernetes version of the control plane.
pub const VERSION_VARIABLE: &str = "HCLOUD_CCM_KUBERNETES_VERSION";

/// Whether the API server's served `gitVersion` (e.g. `v1.37.2`) is the `requested` one: a
/// minor (`1.33`) matches any patch of it, a full version (`1.33.13`, `v1.33.13`) only itself.
pub(crate) fn serves_requested(requested: &str, served: &str) -> bool {
    let requested = requested.trim().trim_start_matches('v');
    let served = served.trim().trim_start_matches('v');
    let served_release = served.split(['-', '+']).next().unwrap_or(served);
    if requested.split('.').count() == 2 {
        served_release.strip_prefix(requested).is_some_and(|rest| rest.starts_with('.'))
    } else {
        served_release == requested
    }
}

/// Fails unless the served version is the one `$HCLOUD_CCM_KUBERNETES_VERSION` asks for (if
/// it asks): `KUBEBUILDER_ASSETS` overrides the version the provisioning script would pick,
/// so a pass meant for 1.33 could otherwise rerun another version without anyone noticing.
pub(crate) fn check_served_version(requested: Option<&str>, served: &str, assets: &Path) -> Result<(), HarnessError> {
    match requested.filter(|r| !r.trim().is_empty()) {
        Some(requested) if !serves_requested(requested, served) => Err(HarnessError::Assets(format!(
            "{VERSION_VARIABLE}={requested} asks for Kubernetes {requested}, but the API server from {} serves {served} \
             (KUBEBUILDER_ASSETS, when set, decides which binaries run): unset KUBEBUILDER_ASSETS or point it at Kubernetes {requested}",
            assets.display()
        ))),
        _ => Ok(()),
    }
}

/// Run a short command to completion; its stdout on success.
pub(crate) async fn run_checked(
    program: impl AsRef<std::ffi::OsStr>,
    args: &[&std::ffi::OsStr],
) -> Result<String, HarnessError> {
    let command_line = format!(
        "{} {}",
        program.as_ref().to_string_lossy(),
        args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    );
    let output = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| HarnessError::io(format!("running `{command_line}`"), e))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(HarnessError::Command {
            command: command_line,
            detail: format!("{}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_version_must_be_the_requested_one() {
        assert!(serves_requested("1.33", "v1.33.13"));
        assert!(serves_requested("1.33.13", "v1.33.13"));
        assert!(serves_requested("v1.33.13", "v1.33.13"));
        assert!(!serves_requested("1.33", "v1.36.3"));
        assert!(!serves_requested("1.3", "v1.33.13"));
        assert!(!serves_requested("1.33.1", "v1.33.13"));
        let assets = Path::new("/assets");
        let error = check_served_version(Some("1.33"), "v1.36.3", assets).expect_err("a mismatch fails");
        let message = error.to_string();
        assert!(message.contains("HCLOUD_CCM_KUBERNETES_VERSION=1.33") && message.contains("v1.36.3"), "{message}");
        assert!(check_served_version(None, "v1.36.3", assets).is_ok());
        assert!(check_served_version(Some(""), "v1.36.3", assets).is_ok());
        assert!(check_served_version(Some("1.36"), "v1.36.3", assets).is_ok());
    }

    #[test]
    fn versions_parse() {
        let v = parse_version("Kubernetes v1.36.3\n");
        assert_eq!(v, Some(ApiServerVersion { full: "v1.36.3".to_owned(), minor: 36 }));
        assert_eq!(parse_version("Kubernetes v1.33.0-rc.1").map(|v| v.minor), Some(33));
        assert_eq!(parse_version("Kubernetes v0.0.0-master"), None);
        assert_eq!(parse_version(""), None);
    }
}
