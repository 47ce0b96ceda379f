//! Every flag of the official CCM is accepted: the list is read from the official binary's
//! `--help` (v1.35.0, provisioned by the test harness), so it cannot drift. Each flag either
//! works or is accepted with exactly one start-up warning naming it.

use clap::Parser;

use crate::cli::Cli;

/// Flags that have no meaning here (with the default controllers): given, each yields exactly
/// one warning naming it.
const NO_EFFECT: &[&str] = &[
    "cloud-config",
    "cert-dir",
    "contention-profiling",
    "profiling",
    "enable-leader-migration",
    "leader-migration-config",
    "external-cloud-volume-plugin",
    "use-service-account-credentials",
    "controller-start-interval",
    "webhooks",
    "webhook-bind-address",
    "webhook-cert-dir",
    "webhook-disable-http2-serving",
    "webhook-tls-cert-file",
    "webhook-tls-cipher-suites",
    "webhook-tls-curve-preferences",
    "webhook-tls-min-version",
    "webhook-tls-private-key-file",
    "webhook-tls-sni-cert-key",
    "log-text-info-buffer-size",
    "log-text-split-stream",
    // Acted on by node-ipam-controller, which is off by default: without it, one warning.
    "cidr-allocator-type",
];

/// A flag of the official `--help`: its name and its pflag type (`None` for booleans).
#[derive(Debug)]
struct OfficialFlag {
    name: String,
    kind: Option<String>,
}

/// The flags of a pflag `--help` text: lines like `  -v, --v Level   text` or
/// `      --leader-elect   text`.
fn parse_help(help: &str) -> Vec<OfficialFlag> {
    let mut flags = Vec::new();
    for line in help.lines() {
        let line = line.trim_start();
        let line = match line.as_bytes() {
            [b'-', c, b',', b' ', ..] if c.is_ascii_alphanumeric() => &line[4..],
            _ => line,
        };
        let Some(rest) = line.strip_prefix("--") else { continue };
        let (name, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        // One space and a word: the type; several spaces: the description of a boolean.
        let kind = if rest.is_empty() || rest.starts_with(' ') {
            None
        } else {
            rest.split_whitespace().next().map(str::to_owned)
        };
        flags.push(OfficialFlag { name: name.to_owned(), kind });
    }
    flags
}

/// Arguments giving the flag a value the official CCM would accept (with a companion flag where
/// one is required), which ours must validate too.
fn plausible_args(flag: &OfficialFlag) -> Vec<String> {
    match flag.name.as_str() {
        "tls-cert-file" | "tls-private-key-file" => {
            return vec!["--tls-cert-file=/etc/k.crt".to_owned(), "--tls-private-key-file=/etc/k.key".to_owned()];
        }
        "allocate-node-cidrs" => {
            return vec!["--allocate-node-cidrs=true".to_owned(), "--cluster-cidr=10.244.0.0/16".to_owned()];
        }
        _ => {}
    }
    vec![format!("--{}={}", flag.name, plausible_value(flag))]
}

/// A value of the flag's type the official CCM would accept.
fn plausible_value(flag: &OfficialFlag) -> String {
    let by_name = match flag.name.as_str() {
        "cloud-provider" => Some("hcloud"),
        "tls-min-version" | "webhook-tls-min-version" => Some("VersionTLS12"),
        "tls-cipher-suites" | "webhook-tls-cipher-suites" => {
            Some("TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")
        }
        "tls-curve-preferences" | "webhook-tls-curve-preferences" => Some("29,23"),
        "tls-sni-cert-key" | "webhook-tls-sni-cert-key" => Some("a.crt,a.key:*.example.com"),
        "logging-format" => Some("text"),
        "leader-elect-resource-lock" => Some("leases"),
        "kube-api-content-type" => Some("application/json"),
        "cidr-allocator-type" => Some("CloudAllocator"),
        "cluster-cidr" => Some("10.244.0.0/16"),
        "controllers" => Some("*,-cloud-node-lifecycle-controller"),
        "feature-gates" => Some("CloudControllerManagerWatchBasedRoutesReconciliation=true"),
        "authorization-always-allow-paths" => Some("/healthz,/metrics"),
        "vmodule" => Some("cloud_controllers=4"),
        "webhook-secure-port" => Some("0"),
        "secure-port" => Some("10300"),
        "controller-start-interval" => Some("1s"),
        "min-resync-period" | "node-status-update-frequency" => Some("1m"),
        "version" => Some("false"),
        "leader-elect-renew-deadline" => Some("8s"),
        "leader-elect-retry-period" => Some("1s"),
        _ => None,
    };
    if let Some(v) = by_name {
        return v.to_owned();
    }
    let value = match flag.kind.as_deref() {
        None => "true",
        Some("string") if flag.name.ends_with("file") || flag.name.ends_with("kubeconfig") => "/etc/k.pem",
        Some("string") => "x",
        Some("strings") => "a,b",
        Some("duration") => "15s",
        Some("int" | "int32") => "3",
        Some("float32") => "25",
        Some("ip") => "127.0.0.1",
        Some("mapStringBool") => "AllBeta=false",
        Some("quantity") => "1Ki",
        Some("Level") => "2",
        other => panic!("--{}: no plausible value for type {other:?}", flag.name),
    };
    value.to_owned()
}

fn official_flags() -> Vec<OfficialFlag> {
    let binary = test_harness::oracle::official_ccm_binary().expect("the official CCM binary");
    let output = std::process::Command::new(&binary).arg("--help").output().expect("running the official --help");
    let help = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    let flags = parse_help(&help);
    assert!(flags.len() >= 75, "too few flags read from {}: {flags:?}", binary.display());
    flags.into_iter().filter(|f| f.name != "help").collect()
}

const BASE: [&str; 3] = ["hcloud-ccm", "--cloud-provider=hcloud", "--allow-untagged-cloud"];

#[test]
fn every_official_flag_is_accepted_and_works_or_warns_once() {
    let mut failures = Vec::new();
    for flag in official_flags() {
        let args = plausible_args(&flag);
        let arg = args.join(" ");
        let cli = match Cli::try_parse_from(BASE.iter().copied().chain(args.iter().map(String::as_str))) {
            Ok(cli) => cli,
            Err(e) => {
                failures.push(format!("{arg}: refused: {}", e.render()));
                continue;
            }
        };
        let options = match cli.manager.validate(hcloud_provider::PROVIDER_NAME) {
            Ok(options) => options,
            Err(errors) => {
                failures.push(format!("{arg}: invalid: {errors:?}"));
                continue;
            }
        };
        let expected = usize::from(NO_EFFECT.contains(&flag.name.as_str()));
        let naming = options.warnings.iter().filter(|w| w.contains(&format!("--{}", flag.name))).count();
        if options.warnings.len() != expected || naming != expected {
            failures.push(format!("{arg}: expected {expected} warning(s) naming it, got {:?}", options.warnings));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// pflag's other spellings: a boolean alone (`--leader-elect`), a value as the next argument
/// (`--secure-port 10300`).
#[test]
fn every_official_flag_parses_in_pflags_other_spellings() {
    let mut failures = Vec::new();
    for flag in official_flags() {
        // A type like `version[=true]` has an optional value, given only with `=`.
        let args = match &flag.kind {
            Some(kind) if !kind.contains("[=") => vec![format!("--{}", flag.name), plausible_value(&flag)],
            _ => vec![format!("--{}", flag.name)],
        };
        if let Err(e) = Cli::try_parse_from(BASE.iter().copied().chain(args.iter().map(String::as_str))) {
            failures.push(format!("{args:?}: {}", e.render()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_effect_flags_are_official_flags() {
    let official: Vec<String> = official_flags().into_iter().map(|f| f.name).collect();
    for flag in NO_EFFECT {
        assert!(official.iter().any(|o| o == flag), "--{flag} is not an official flag");
    }
}

#[test]
fn the_help_parser_reads_pflag_lines() {
    let help = "Usage:\n  -h, --help   help\n      --leader-elect   Start.\n      --v Level   x\n      \
                --vmodule pattern=N,...   y\n                   continuation --not-a-flag\n";
    let flags = parse_help(help);
    let read: Vec<(&str, Option<&str>)> = flags.iter().map(|f| (f.name.as_str(), f.kind.as_deref())).collect();
    assert_eq!(
        read,
        vec![("help", None), ("leader-elect", None), ("v", Some("Level")), ("vmodule", Some("pattern=N,..."))]
    );
}
