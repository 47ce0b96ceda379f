//! Hetzner's own programs as oracles: the official Go cloud-controller-manager and the `hcloud`
//! CLI, built once by `scripts/provision-oracles` from the release sources in `../shared/oracle`
//! and cached outside the checkout.
//!
//! [`OfficialCcm::spawn`] is the one place that starts the official CCM: it always sets
//! `HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true`, because with `HCLOUD_NETWORK` set the official
//! CCM otherwise asks Hetzner's metadata service at 169.254.169.254 (an address outside this
//! machine that tests must never send to) whether its own server is in the network.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::HarnessError;
use crate::process::ChildProcess;
use crate::provision::provisioned_path;

/// The release of the official CCM the oracle is built from.
pub const OFFICIAL_CCM_VERSION: &str = "v1.35.0";
/// The release of the `hcloud` CLI the oracle is built from.
pub const HCLOUD_CLI_VERSION: &str = "v1.67.0";

/// The environment the official CCM always gets, whatever the caller passes (set last, so it
/// wins): no metadata lookup off this machine.
pub const OFFICIAL_CCM_FORCED_ENV: &[(&str, &str)] = &[("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true")];

/// The directory holding `hcloud-cloud-controller-manager` and `hcloud`, provisioned on first
/// use (a cold build takes about 6 minutes; progress on stderr). Callers fail on an error, they
/// never skip.
pub fn oracle_dir() -> Result<PathBuf, HarnessError> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/provision-oracles");
    DIR.get_or_init(|| provisioned_path(&script, "HCLOUD_CCM_ORACLES").map_err(|e| e.to_string()))
        .clone()
        .map_err(|detail| HarnessError::Command { command: script.display().to_string(), detail })
}

/// The official CCM's binary.
pub fn official_ccm_binary() -> Result<PathBuf, HarnessError> {
    Ok(oracle_dir()?.join("hcloud-cloud-controller-manager"))
}

/// The `hcloud` CLI's binary.
pub fn hcloud_cli_binary() -> Result<PathBuf, HarnessError> {
    Ok(oracle_dir()?.join("hcloud"))
}

/// The official CCM's release source archive, `hcloud-cloud-controller-manager-<version>.tar.gz`
/// in `$HCLOUD_CCM_ORACLE_DIR` or `../shared/oracle` beside the checkout (where
/// `scripts/provision-oracles` finds it and checks its sha256).
pub fn official_ccm_archive() -> PathBuf {
    let dir = std::env::var_os("HCLOUD_CCM_ORACLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/oracle"));
    dir.join(format!("hcloud-cloud-controller-manager-{}.tar.gz", OFFICIAL_CCM_VERSION.trim_start_matches('v')))
}

/// The official release's chart and static manifests, unpacked from [`official_ccm_archive`]
/// into a temporary directory that is removed on drop. Read at test time, never copied into
/// the repository.
#[derive(Debug)]
pub struct OfficialRelease {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl OfficialRelease {
    /// Unpacks `chart/` and `deploy/` of the archive (a few kilobytes).
    pub fn unpack() -> Result<OfficialRelease, HarnessError> {
        let archive = official_ccm_archive();
        let dir = tempfile::Builder::new()
            .prefix("official-ccm-")
            .tempdir()
            .map_err(|e| HarnessError::io("creating a directory for the official release", e))?;
        let out = std::process::Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(dir.path())
            .args(["--wildcards", "*/chart/*", "*/deploy/*"])
            .output()
            .map_err(|e| HarnessError::io("running tar", e))?;
        if !out.status.success() {
            return Err(HarnessError::Command {
                command: format!("tar -xzf {}", archive.display()),
                detail: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        let root = dir
            .path()
            .join(format!("hcloud-cloud-controller-manager-{}", OFFICIAL_CCM_VERSION.trim_start_matches('v')));
        if !root.join("chart/Chart.yaml").is_file() {
            return Err(HarnessError::Command {
                command: format!("tar -xzf {}", archive.display()),
                detail: format!("no chart/Chart.yaml under {}", root.display()),
            });
        }
        Ok(OfficialRelease { _dir: dir, root })
    }

    /// The official chart's directory (`chart/`: Chart.yaml, values.yaml, templates).
    pub fn chart(&self) -> PathBuf {
        self.root.join("chart")
    }

    /// The official static manifest `deploy/<name>` (`ccm.yaml` or `ccm-networks.yaml`).
    pub fn static_manifest(&self, name: &str) -> PathBuf {
        self.root.join("deploy").join(name)
    }
}

/// Starts the official CCM.
pub struct OfficialCcm;

impl OfficialCcm {
    /// Spawns the official CCM with `args` and `env` (the caller's, e.g. `HCLOUD_TOKEN`,
    /// `HCLOUD_ENDPOINT`, `HCLOUD_METRICS_ADDRESS`, `--kubeconfig`, `--secure-port`), followed by
    /// [`OFFICIAL_CCM_FORCED_ENV`], which therefore always wins.
    pub fn spawn(args: &[&str], env: &[(&str, &str)], name: &str) -> Result<ChildProcess, HarnessError> {
        let binary = official_ccm_binary()?;
        ChildProcess::spawn(&binary, args, &with_forced_env(env), name)
    }
}

/// `env` followed by [`OFFICIAL_CCM_FORCED_ENV`] (later entries win when a child's environment
/// is built).
fn with_forced_env<'a>(env: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut all: Vec<(&str, &str)> = env.iter().filter(|(k, _)| !is_forced(k)).copied().collect();
    all.extend_from_slice(OFFICIAL_CCM_FORCED_ENV);
    all
}

fn is_forced(key: &str) -> bool {
    OFFICIAL_CCM_FORCED_ENV.iter().any(|(k, _)| *k == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attached_check_is_always_disabled_even_when_a_caller_asks_otherwise() {
        let env = with_forced_env(&[("HCLOUD_NETWORK", "k8s"), ("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "false")]);
        assert_eq!(env, vec![("HCLOUD_NETWORK", "k8s"), ("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", "true")]);
    }
}
