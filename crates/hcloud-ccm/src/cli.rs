//! The command line: upstream's cloud-controller-manager flags (from
//! `cloud-controller-manager`) plus the help text for the Hetzner environment variables.

use clap::Parser;
use cloud_controller_manager::ManagerArgs;
use hcloud_provider::config::ENV_HELP;
use hcloud_provider::load_balancers::defaults::ENV_HELP as LB_ENV_HELP;

/// Environment variable for `--load-balancer-class`.
pub const LOAD_BALANCER_CLASS_ENV: &str = "HCLOUD_LOAD_BALANCER_CLASS";

fn env_help() -> String {
    let mut s = String::from("Environment (Hetzner settings, same names as the official CCM):\n");
    for (k, v) in ENV_HELP.iter().chain(LB_ENV_HELP) {
        s.push_str(&format!("  {k}\n      {v}\n"));
    }
    s.push_str(
        "\nServices of type LoadBalancer take the official CCM's load-balancer.hetzner.cloud/* annotations;\n\
         each annotation overrides the matching HCLOUD_LOAD_BALANCERS_* variable.\n",
    );
    s.push_str(
        "\nFlags marked [compat] are accepted so the official chart's arguments work, and have no effect.\n\
         Logs: RUST_LOG overrides --v (e.g. RUST_LOG=hcloud_provider=debug); NO_COLOR turns colours off.",
    );
    s
}

/// `--version`: the crate version, the git commit and the build date (from `build.rs`).
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("HCLOUD_CCM_VERSION_COMMIT"),
    ", built ",
    env!("HCLOUD_CCM_VERSION_DATE"),
    ")"
);

/// hcloud-ccm: the Kubernetes cloud-controller-manager for Hetzner Cloud.
#[derive(Debug, Clone, Parser)]
// Like Go's flag package, a repeated flag overrides the earlier one.
#[command(
    name = "hcloud-ccm",
    about,
    // `--version` is an argument, as upstream's (`--version`, `--version=raw`, ...).
    disable_version_flag = true,
    args_override_self = true,
    mut_arg("cloud_provider", |a| a.help("Cloud provider name: hcloud")),
    // hcloud-ccm only (the official CCM cannot share LoadBalancer Services with another
    // implementation): the generic flag, also read from the environment.
    mut_arg("load_balancer_class", |a| a.env(LOAD_BALANCER_CLASS_ENV)),
    after_long_help = env_help(),
    after_help = "Run with --help for the environment variables."
)]
pub struct Cli {
    /// Upstream's flags.
    #[command(flatten)]
    pub manager: ManagerArgs,

    /// Print the version and exit; `--version=raw` adds the build details. `--version=false` runs
    /// as usual; `--version=vX.Y.Z` (upstream: "sets the reported version") runs with a warning
    /// that the version reported stays this binary's.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "true|raw")]
    pub version: Option<String>,
}

/// What `--version` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionRequest {
    /// Run; no version flag (or `--version=false`).
    Run,
    /// Print this text and exit.
    Print(String),
    /// Run, logging this warning (`--version=vX.Y.Z`).
    RunWithWarning(String),
}

impl Cli {
    /// What `--version` asks for.
    pub fn version_request(&self) -> VersionRequest {
        match self.version.as_deref() {
            None | Some("false" | "f" | "0" | "F" | "FALSE" | "False") => VersionRequest::Run,
            Some("raw") => VersionRequest::Print(format!(
                "hcloud-ccm {LONG_VERSION}\nversion: {}\ncommit: {}\nbuilt: {}\nplatform: {}/{}",
                env!("CARGO_PKG_VERSION"),
                env!("HCLOUD_CCM_VERSION_COMMIT"),
                env!("HCLOUD_CCM_VERSION_DATE"),
                std::env::consts::OS,
                std::env::consts::ARCH
            )),
            Some("true" | "t" | "1" | "T" | "TRUE" | "True") => {
                VersionRequest::Print(format!("hcloud-ccm {LONG_VERSION}"))
            }
            Some(other) => VersionRequest::RunWithWarning(format!(
                "--version={other} has no effect: the version reported is this binary's ({})",
                env!("CARGO_PKG_VERSION")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_official_charts_arguments_are_accepted() {
        let cli = Cli::try_parse_from([
            "hcloud-ccm",
            "--cloud-provider=hcloud",
            "--allow-untagged-cloud",
            "--route-reconciliation-period=30s",
            "--webhook-secure-port=0",
            "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--leader-elect=false",
        ])
        .expect("parses");
        let options = cli.manager.validate(hcloud_provider::PROVIDER_NAME).expect("valid");
        assert!(options.leader_election.is_none());
        assert!(options.warnings.is_empty(), "{:?}", options.warnings);
    }

    #[test]
    fn a_repeated_flag_overrides_the_earlier_one_like_go_flags() {
        let cli = Cli::try_parse_from(["hcloud-ccm", "--secure-port=0", "--secure-port=10300"]).expect("parses");
        assert_eq!(cli.manager.secure_port, 10300);
    }

    #[test]
    fn repeatable_flags_accumulate_like_pflag() {
        let cli =
            Cli::try_parse_from(["hcloud-ccm", "--tls-sni-cert-key=a.crt,a.key", "--tls-sni-cert-key=b.crt,b.key"])
                .expect("parses");
        assert_eq!(cli.manager.serving.tls_sni_cert_key, vec!["a.crt,a.key".to_owned(), "b.crt,b.key".to_owned()]);
    }

    #[test]
    fn the_load_balancer_class_comes_from_the_flag_or_the_environment() {
        let cli = Cli::try_parse_from(["hcloud-ccm", "--load-balancer-class=example.com/hcloud"]).expect("parses");
        assert_eq!(cli.manager.load_balancer_class, "example.com/hcloud");
        let help = <Cli as clap::CommandFactory>::command().render_long_help().to_string();
        assert!(help.contains("[env: HCLOUD_LOAD_BALANCER_CLASS="), "{help}");
        let arg = <Cli as clap::CommandFactory>::command()
            .get_arguments()
            .find(|a| a.get_id() == "load_balancer_class")
            .map(|a| a.get_env().map(|e| e.to_os_string()))
            .expect("the flag exists");
        assert_eq!(arg.as_deref(), Some(std::ffi::OsStr::new(LOAD_BALANCER_CLASS_ENV)));
    }

    #[test]
    fn another_cloud_provider_is_refused() {
        let cli =
            Cli::try_parse_from(["hcloud-ccm", "--cloud-provider=aws", "--allow-untagged-cloud"]).expect("parses");
        let errors = cli.manager.validate(hcloud_provider::PROVIDER_NAME).unwrap_err();
        assert_eq!(errors, vec!["--cloud-provider: \"aws\" is not supported; supported: hcloud".to_owned()]);
    }

    #[test]
    fn help_lists_the_environment_and_upstream_flags() {
        let mut cmd = <Cli as clap::CommandFactory>::command();
        let help = cmd.render_long_help().to_string();
        for needle in [
            "HCLOUD_TOKEN",
            "HCLOUD_NETWORK",
            "HCLOUD_SERVER_CACHE_MODE",
            "HCLOUD_LOAD_BALANCERS_ENABLED",
            "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL",
            "load-balancer.hetzner.cloud/",
            "--node-monitor-period",
            "--leader-elect-lease-duration",
            "--secure-port",
            "NO_COLOR",
        ] {
            assert!(help.contains(needle), "{needle} missing from --help");
        }
    }

    #[test]
    fn version_names_the_crate_version_the_commit_and_the_build_date() {
        let cli = Cli::try_parse_from(["hcloud-ccm", "--version"]).expect("parses");
        let VersionRequest::Print(text) = cli.version_request() else { panic!("--version prints") };
        let rest =
            text.trim_end().strip_prefix(concat!("hcloud-ccm ", env!("CARGO_PKG_VERSION"), " (commit ")).expect(&text);
        let (commit, date) = rest.strip_suffix(')').and_then(|r| r.split_once(", built ")).expect(&text);
        // The commit of this checkout (unless the build named one, or has no git at all).
        let manifest_dir = env!("CARGO_MANIFEST_DIR");
        let head = std::process::Command::new("git")
            .args(["-C", manifest_dir, "rev-parse", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        match env!("HCLOUD_CCM_VERSION_COMMIT_SOURCE") {
            "git" => assert_eq!(Some(commit), head.as_deref(), "build.rs did not rerun after HEAD moved"),
            "none" => assert_eq!((commit, head), ("unknown", None)),
            _ => assert!(!commit.is_empty(), "named by HCLOUD_CCM_GIT_COMMIT"),
        }
        // RFC 3339 UTC, e.g. 2025-01-31T12:00:00Z.
        let shape: String = date.chars().map(|c| if c.is_ascii_digit() { '0' } else { c }).collect();
        assert_eq!(shape, "0000-00-00T00:00:00Z", "{date}");
    }

    #[test]
    fn version_takes_upstreams_values() {
        let request = |arg: &str| Cli::try_parse_from(["hcloud-ccm", arg]).map(|c| c.version_request());
        assert_eq!(request("--version=false").ok(), Some(VersionRequest::Run));
        assert!(matches!(request("--version=raw"), Ok(VersionRequest::Print(t)) if t.contains("\nplatform: ")));
        assert!(matches!(request("--version=true"), Ok(VersionRequest::Print(_))));
        assert!(matches!(request("--version=v1.35.0"), Ok(VersionRequest::RunWithWarning(w)) if w.contains("v1.35.0")));
    }

    #[test]
    fn every_flag_and_variable_is_in_docs_reference() {
        let reference = include_str!("../../../docs/reference.md");
        let mut missing = Vec::new();
        for arg in <Cli as clap::CommandFactory>::command().get_arguments() {
            if let Some(long) = arg.get_long()
                && !matches!(long, "help")
                && !reference.contains(&format!("`--{long}`"))
            {
                missing.push(format!("--{long}"));
            }
        }
        // The variables `--help` lists, those the flags fall back to, and every one the binary
        // reads (the provider's configuration asked, and std::env reads in the non-test source
        // of the crates it is built from: crate::env_reads).
        let mut variables: std::collections::BTreeMap<String, String> =
            ENV_HELP.iter().chain(LB_ENV_HELP).map(|(k, _)| ((*k).to_owned(), "listed by --help".to_owned())).collect();
        for arg in <Cli as clap::CommandFactory>::command().get_arguments() {
            if let Some(env) = arg.get_env().and_then(|e| e.to_str()) {
                variables.insert(env.to_owned(), format!("the fallback of --{}", arg.get_long().unwrap_or_default()));
            }
        }
        assert!(variables.contains_key(LOAD_BALANCER_CLASS_ENV), "{variables:?}");
        for (variable, found) in crate::env_reads::variables() {
            variables.entry(variable).or_insert(found);
        }
        for (variable, found) in &variables {
            if !reference.contains(&format!("`{variable}`")) {
                missing.push(format!("{variable} ({found})"));
            }
        }
        for annotation in hcloud_provider::load_balancers::annotations::ALL {
            let suffix = annotation.trim_start_matches(hcloud_provider::load_balancers::annotations::PREFIX);
            if !reference.contains(&format!("`{suffix}`")) {
                missing.push((*annotation).to_owned());
            }
        }
        assert!(missing.is_empty(), "docs/reference.md lacks {missing:?}");
    }
}
