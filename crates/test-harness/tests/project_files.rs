//! The files a project is judged by say what is true: the license text is the Apache-2.0 text
//! `Cargo.toml` names, the security policy and the changelog have their form, the version
//! policy lists the Kubernetes releases the provisioning scripts pin, and the README says that
//! nothing is published while the chart still carries its placeholder image.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;

fn read(path: &str) -> String {
    let full: PathBuf = crate::deploy::repo_root().join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// sha256 of <https://www.apache.org/licenses/LICENSE-2.0.txt> (and of Debian's
/// `/usr/share/common-licenses/Apache-2.0`, which LICENSE was copied from).
const APACHE_2_0_SHA256: &str = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30";

#[test]
fn the_license_is_the_apache_2_0_text_cargo_toml_names() {
    let out = std::process::Command::new("sha256sum")
        .arg(crate::deploy::repo_root().join("LICENSE"))
        .output()
        .expect("sha256sum runs");
    let hash = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_owned();
    assert_eq!(hash, APACHE_2_0_SHA256, "LICENSE is not the exact Apache-2.0 text");
    assert!(read("Cargo.toml").contains("\nlicense = \"Apache-2.0\"\n"), "Cargo.toml's license");
}

#[test]
fn security_policy_and_changelog_have_their_form() {
    let security = read("SECURITY.md");
    assert!(security.contains("/security/advisories/new"), "reports go through private vulnerability reporting");
    assert!(security.contains("## Supported versions"));
    let changelog = read("CHANGELOG.md");
    assert!(changelog.contains("keepachangelog.com/en/1.1.0"));
    assert!(changelog.contains("\n## [Unreleased]\n"));
    // Keep a Changelog's sections only.
    for heading in changelog.lines().filter(|l| l.starts_with("### ")) {
        assert!(
            ["### Added", "### Changed", "### Deprecated", "### Removed", "### Fixed", "### Security"]
                .contains(&heading),
            "not a Keep a Changelog section: {heading}"
        );
    }
}

#[test]
fn the_version_policy_lists_the_pinned_kubernetes_releases() {
    let script = read("scripts/lib/provision.sh");
    let policy = read("docs/version-policy.md");
    let mut pinned = Vec::new();
    for line in script.lines() {
        // `    1.33) echo "1.33.13" ;;`
        let Some((minor, rest)) = line.trim().split_once(") echo \"") else { continue };
        let Some(release) = rest.strip_suffix("\" ;;") else { continue };
        pinned.push((minor.to_owned(), release.to_owned()));
    }
    assert_eq!(pinned.len(), 5, "1.33-1.37 pinned: {pinned:?}");
    for (minor, release) in &pinned {
        assert!(
            policy.contains(&format!("| {minor} | {release} |")),
            "docs/version-policy.md lacks {minor} -> {release}"
        );
    }
    assert!(policy.contains("hcloud-cloud-controller-manager v1.35.0"));
    assert!(read("crates/test-harness/src/oracle.rs").contains("OFFICIAL_CCM_VERSION: &str = \"v1.35.0\""));
}

#[test]
fn the_readme_says_nothing_is_published_while_the_image_is_a_placeholder() {
    let values = read("deploy/chart/hcloud-ccm/values.yaml");
    let readme = read("README.md");
    if values.contains("\n  repository: hcloud-ccm\n") {
        assert!(readme.contains("**Published: nothing yet.**"), "README must say nothing is published");
        assert!(readme.contains("It has not yet run against the"), "README must say where it has not run");
    }
    // The operator's way in comes before the developer's.
    let install = readme.find("\n## Install\n").expect("an Install section");
    let develop = readme.find("\n## Develop").expect("a Develop section");
    assert!(install < develop, "Install comes first");
}
