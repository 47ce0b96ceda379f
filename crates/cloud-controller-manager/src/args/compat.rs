//! Upstream flags that have no meaning here (webhooks, leader migration, volume plugins,
//! contention profiling, klog's alpha output options): accepted so existing arguments keep
//! working, each with one start-up warning that names it and says why it does nothing.
//! Also the logging flags of component-base (`--logging-format`, `--vmodule`,
//! `--log-flush-frequency`).

use std::time::Duration;

use clap::{ArgAction, Args};

use super::values::{go_bool, go_duration};

/// Accepted flags without an effect here. Each is `None` unless given.
#[derive(Debug, Clone, Args)]
pub struct NoEffectArgs {
    /// [compat] Block profiling (there is no profiling endpoint here).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    pub contention_profiling: Option<bool>,

    /// [compat] Leader migration between kube-controller-manager and a CCM (for in-tree providers).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    pub enable_leader_migration: Option<bool>,

    /// [compat] Leader migration configuration file.
    #[arg(long)]
    pub leader_migration_config: Option<String>,

    /// [compat] Volume plugin of in-tree cloud providers.
    #[arg(long)]
    pub external_cloud_volume_plugin: Option<String>,

    /// [compat] Webhooks to enable (upstream's CCM has none for this provider).
    #[arg(long)]
    pub webhooks: Option<String>,

    /// [compat] Webhook server address.
    #[arg(long)]
    pub webhook_bind_address: Option<String>,

    /// [compat] Webhook server certificate directory.
    #[arg(long)]
    pub webhook_cert_dir: Option<String>,

    /// [compat] Webhook server HTTP/2 switch.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    pub webhook_disable_http2_serving: Option<bool>,

    /// [compat] Webhook server certificate.
    #[arg(long)]
    pub webhook_tls_cert_file: Option<String>,

    /// [compat] Webhook server cipher suites.
    #[arg(long)]
    pub webhook_tls_cipher_suites: Option<String>,

    /// [compat] Webhook server key exchange groups.
    #[arg(long)]
    pub webhook_tls_curve_preferences: Option<String>,

    /// [compat] Webhook server minimum TLS version.
    #[arg(long)]
    pub webhook_tls_min_version: Option<String>,

    /// [compat] Webhook server private key.
    #[arg(long)]
    pub webhook_tls_private_key_file: Option<String>,

    /// [compat] Webhook server SNI certificates.
    #[arg(long, action = ArgAction::Append)]
    pub webhook_tls_sni_cert_key: Vec<String>,

    /// [compat] klog's alpha info-message buffer (logs are written line by line here).
    #[arg(long)]
    pub log_text_info_buffer_size: Option<String>,

    /// [compat] klog's alpha split of info (stdout) and error (stderr) streams.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    pub log_text_split_stream: Option<bool>,
}

/// Why each flag of [`NoEffectArgs`] does nothing.
const WEBHOOKS: &str =
    "this cloud-controller-manager serves no webhooks (upstream's has none for this provider either)";
const LEADER_MIGRATION: &str =
    "leader migration moves in-tree cloud controllers out of kube-controller-manager; this provider was never in-tree";

impl NoEffectArgs {
    /// One warning per flag given.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut warn = |given: bool, flag: &str, why: &str| {
            if given {
                warnings.push(format!("--{flag} has no effect: {why}"));
            }
        };
        warn(
            self.contention_profiling.is_some(),
            "contention-profiling",
            "there is no profiling endpoint (Go's block profiler does not exist here)",
        );
        warn(self.enable_leader_migration.is_some(), "enable-leader-migration", LEADER_MIGRATION);
        warn(self.leader_migration_config.is_some(), "leader-migration-config", LEADER_MIGRATION);
        warn(
            self.external_cloud_volume_plugin.is_some(),
            "external-cloud-volume-plugin",
            "volume plugins belong to in-tree cloud providers in kube-controller-manager",
        );
        warn(self.webhooks.is_some(), "webhooks", WEBHOOKS);
        warn(self.webhook_bind_address.is_some(), "webhook-bind-address", WEBHOOKS);
        warn(self.webhook_cert_dir.is_some(), "webhook-cert-dir", WEBHOOKS);
        warn(self.webhook_disable_http2_serving.is_some(), "webhook-disable-http2-serving", WEBHOOKS);
        warn(self.webhook_tls_cert_file.is_some(), "webhook-tls-cert-file", WEBHOOKS);
        warn(self.webhook_tls_cipher_suites.is_some(), "webhook-tls-cipher-suites", WEBHOOKS);
        warn(self.webhook_tls_curve_preferences.is_some(), "webhook-tls-curve-preferences", WEBHOOKS);
        warn(self.webhook_tls_min_version.is_some(), "webhook-tls-min-version", WEBHOOKS);
        warn(self.webhook_tls_private_key_file.is_some(), "webhook-tls-private-key-file", WEBHOOKS);
        warn(!self.webhook_tls_sni_cert_key.is_empty(), "webhook-tls-sni-cert-key", WEBHOOKS);
        warn(
            self.log_text_info_buffer_size.is_some(),
            "log-text-info-buffer-size",
            "logs are written line by line, unbuffered",
        );
        warn(
            self.log_text_split_stream.is_some(),
            "log-text-split-stream",
            "every log line goes to stderr (this alpha klog option is not implemented)",
        );
        warnings
    }
}

/// component-base's logging flags.
#[derive(Debug, Clone, Args)]
pub struct LoggingArgs {
    /// Log format: `text` (as --log-format=plain) or `json` (as --log-format=json); overrides
    /// --log-format.
    #[arg(long, value_parser = ["text", "json"])]
    pub logging_format: Option<String>,

    /// `pattern=N,...`: verbosity N for the log targets matching pattern (a Rust module path
    /// like `cloud_controllers::route`; a trailing `*` matches a prefix). Patterns naming Go
    /// source files match nothing here (a warning says so). Repeatable: the occurrences add up
    /// (as upstream's).
    #[arg(long, action = ArgAction::Append)]
    pub vmodule: Vec<String>,

    /// Longest time between log flushes (every line is written at once here).
    #[arg(long, default_value = "5s", value_parser = go_duration)]
    pub log_flush_frequency: Duration,
}

/// A `--vmodule` entry turned into a `tracing` filter directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmoduleDirective {
    /// The target (module path prefix).
    pub target: String,
    /// The klog verbosity.
    pub verbosity: u8,
}

/// Parses `--vmodule` (klog syntax, `pattern=N` comma-separated): entries whose pattern is a
/// Rust module path (letters, digits, `_`, `::`, optionally ending in `*`) become directives;
/// others (Go file globs) are returned as warnings. Malformed entries are errors, as in klog.
pub fn parse_vmodule(value: &str) -> Result<(Vec<VmoduleDirective>, Vec<String>), String> {
    let mut directives = Vec::new();
    let mut warnings = Vec::new();
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((pattern, level)) = item.split_once('=') else {
            return Err(format!("--vmodule: {item:?}: expected pattern=N (comma-separated), e.g. cloud_controllers=4"));
        };
        let verbosity = level
            .trim()
            .parse::<u8>()
            .map_err(|_| format!("--vmodule: {item:?}: {level:?} is not a verbosity (0-255)"))?;
        let target = pattern.trim().trim_end_matches('*');
        let rust_path = !target.is_empty()
            && target
                .split("::")
                .all(|seg| !seg.is_empty() && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        if rust_path {
            directives.push(VmoduleDirective { target: target.to_owned(), verbosity });
        } else {
            warnings.push(format!(
                "--vmodule: {pattern:?} matches no log target here (patterns are Rust module paths like \
                 cloud_controllers::route, not Go file names)"
            ));
        }
    }
    Ok((directives, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmodule_keeps_module_paths_and_warns_about_go_globs() {
        let (directives, warnings) =
            parse_vmodule("cloud_controllers::route=4,some_provider*=2,controller*.go=3").unwrap_or_default();
        assert_eq!(
            directives,
            vec![
                VmoduleDirective { target: "cloud_controllers::route".to_owned(), verbosity: 4 },
                VmoduleDirective { target: "some_provider".to_owned(), verbosity: 2 },
            ]
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("controller*.go"), "{warnings:?}");
        assert!(parse_vmodule("foo").is_err());
        assert!(parse_vmodule("foo=x").is_err());
        assert_eq!(parse_vmodule("").map(|(d, w)| (d.len(), w.len())), Ok((0, 0)));
    }
}
