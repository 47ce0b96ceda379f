//! Cached tools a fresh machine lacks (Python virtualenvs with pinned packages), made by the
//! repository's provisioning scripts. Each script answers `--check` cheaply when its cache is
//! ready and otherwise builds it; either way it prints `<MARKER>=<path>` as a line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::HarnessError;

fn marked_path(stdout: &[u8], marker: &str) -> Option<PathBuf> {
    let prefix = format!("{marker}=");
    String::from_utf8_lossy(stdout).lines().rev().find_map(|l| l.strip_prefix(&prefix).map(PathBuf::from))
}

/// The path `script` prints as `<marker>=<path>`: from its `--check` when its cache is ready,
/// else from a full run (its progress goes to stderr). Callers fail on an error, never skip.
pub fn provisioned_path(script: &Path, marker: &str) -> Result<PathBuf, HarnessError> {
    if let Ok(out) = Command::new(script).arg("--check").output()
        && out.status.success()
        && let Some(path) = marked_path(&out.stdout, marker)
    {
        return Ok(path);
    }
    eprintln!("{}: no cache yet; running it", script.display());
    let out = Command::new(script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| HarnessError::io(format!("running {}", script.display()), e))?;
    let command = script.display().to_string();
    if !out.status.success() {
        return Err(HarnessError::Command { command, detail: format!("{}; see its output above", out.status) });
    }
    marked_path(&out.stdout, marker)
        .ok_or_else(|| HarnessError::Command { command, detail: format!("printed no {marker}=<path> line") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_marked_line_wins() {
        let out = b"progress\nX_PYTHON=/old\nnoise\nX_PYTHON=/venv/bin/python\n";
        assert_eq!(marked_path(out, "X_PYTHON"), Some(PathBuf::from("/venv/bin/python")));
        assert_eq!(marked_path(out, "Y_PYTHON"), None);
        assert_eq!(marked_path(b"X_PYTHONX=/a\n", "X_PYTHON"), None);
    }
}
