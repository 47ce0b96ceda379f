//! Build metadata for `hcloud-ccm --version`: the git commit and the build date, as the
//! compile-time variables `HCLOUD_CCM_VERSION_COMMIT` and `HCLOUD_CCM_VERSION_DATE`. (Their
//! names differ from the inputs' on purpose: cargo also sets them in the environment of
//! `cargo test` processes, and a test that runs cargo would otherwise pass them back in as an
//! override, rerunning this script.)
//!
//! - Commit: `HCLOUD_CCM_GIT_COMMIT` from the environment if set (a build from a source
//!   tarball can name its commit), else `git rev-parse HEAD` of the checkout, else `unknown`
//!   (no git, no `.git`, not a checkout: never a build failure).
//! - Date: `SOURCE_DATE_EPOCH` (seconds; the reproducible-builds convention) if set, else the
//!   time this script runs, as RFC 3339 UTC (`2025-01-31T12:00:00Z`).
//!
//! The script reruns when HEAD moves (a commit, a checkout; also in a git worktree, whose HEAD
//! lives apart from the shared refs) or when either variable changes; otherwise the values stay,
//! so an unchanged tree gives a byte-identical binary (the image build caches on its hash).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

#[path = "src/build_date.rs"]
mod build_date;

fn main() {
    println!("cargo:rerun-if-env-changed=HCLOUD_CCM_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let (commit, source) = match std::env::var("HCLOUD_CCM_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => (c.trim().to_owned(), "env"),
        _ => git_commit().map_or_else(|| ("unknown".to_owned(), "none"), |c| (c, "git")),
    };
    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0));
    println!("cargo:rustc-env=HCLOUD_CCM_VERSION_COMMIT={commit}");
    // Where the commit came from (`env`, `git`, `none`), for the test of `--version`.
    println!("cargo:rustc-env=HCLOUD_CCM_VERSION_COMMIT_SOURCE={source}");
    println!("cargo:rustc-env=HCLOUD_CCM_VERSION_DATE={}", build_date::rfc3339(epoch));
}

/// `git rev-parse HEAD`, and rerun-if-changed on the files that move with HEAD. `None` when
/// git or the checkout is missing.
fn git_commit() -> Option<String> {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").arg("-C").arg(&manifest_dir).args(args).output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    // HEAD (per worktree), the branch it points to and packed-refs (shared by worktrees).
    let absolute = |p: String| if Path::new(&p).is_absolute() { PathBuf::from(p) } else { manifest_dir.join(p) };
    if let Some(git_dir) = git(&["rev-parse", "--git-dir"]).map(absolute) {
        println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]).map(absolute) {
        // Only paths that exist: cargo reruns a script on every build while a watched path is
        // missing (a new date each time; the image build caches on the binary's hash). A path
        // that disappears (a loose ref packed away) makes it rerun once and watch anew.
        let packed = common.join("packed-refs");
        if packed.exists() {
            println!("cargo:rerun-if-changed={}", packed.display());
        }
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            // The branch's loose ref, or (packed, no loose file yet) the nearest existing
            // directory above it, where the next commit writes it.
            let loose = common.join(&branch);
            if let Some(watch) = loose.ancestors().find(|p| p.exists() && p.starts_with(&common)) {
                println!("cargo:rerun-if-changed={}", watch.display());
            }
        }
    }
    Some(commit)
}
