//! Repeated flags, parsed with the settings of the program's own parser (hcloud-ccm's `Cli`:
//! `args_override_self`), against Go's pflag semantics: a list flag's first occurrence replaces
//! the default and later ones append (StringSlice, NamedCertKeyArray, `--vmodule`);
//! `--feature-gates` merges its occurrences, a later value winning for the same gate; a plain
//! value flag keeps the last.

use super::*;
use clap::Parser;

#[derive(Debug, Parser)]
#[command(args_override_self = true)]
struct GoCli {
    #[command(flatten)]
    manager: ManagerArgs,
}

fn parse(extra: &[&str]) -> ManagerArgs {
    let mut argv = vec!["ccm", "--cloud-provider=fake", "--allow-untagged-cloud"];
    argv.extend_from_slice(extra);
    GoCli::try_parse_from(argv).map(|c| c.manager).expect("parses")
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|i| (*i).to_owned()).collect()
}

#[test]
fn string_slice_flags_replace_the_default_then_append() {
    let a = parse(&["--controllers=cloud-node", "--controllers=route,service"]);
    assert_eq!(a.controllers, strings(&["cloud-node", "route", "service"]));
    let a = parse(&[
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "--tls-curve-preferences=X25519",
        "--tls-curve-preferences=CurveP256",
    ]);
    assert_eq!(
        a.serving.tls_cipher_suites,
        strings(&["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"])
    );
    assert_eq!(a.serving.tls_curve_preferences, strings(&["X25519", "CurveP256"]));
    let a = parse(&[
        "--authorization-always-allow-paths=/healthz",
        "--authorization-always-allow-paths=/metrics,/debug/*",
        "--requestheader-allowed-names=front-proxy",
        "--requestheader-allowed-names=aggregator",
        "--requestheader-username-headers=X-User",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Group",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-uid-headers=X-Uid",
        "--requestheader-uid-headers=X-Remote-Uid",
        "--requestheader-extra-headers-prefix=X-Extra-",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    ]);
    let auth = &a.auth;
    assert_eq!(auth.authorization_always_allow_paths, strings(&["/healthz", "/metrics", "/debug/*"]));
    assert_eq!(auth.requestheader_allowed_names, strings(&["front-proxy", "aggregator"]));
    assert_eq!(auth.requestheader_username_headers, strings(&["X-User", "X-Remote-User"]));
    assert_eq!(auth.requestheader_group_headers, strings(&["X-Group", "X-Remote-Group"]));
    assert_eq!(auth.requestheader_uid_headers, strings(&["X-Uid", "X-Remote-Uid"]));
    assert_eq!(auth.requestheader_extra_headers_prefix, strings(&["X-Extra-", "X-Remote-Extra-"]));
    // Once given, the default is gone (upstream: the first Set replaces it).
    let a = parse(&["--authorization-always-allow-paths=/metrics"]);
    assert_eq!(a.auth.authorization_always_allow_paths, strings(&["/metrics"]));
    // And the defaults stay when the flag is not given.
    let a = parse(&[]);
    assert_eq!(a.auth.authorization_always_allow_paths, strings(&["/healthz", "/readyz", "/livez"]));
    assert_eq!(a.controllers, strings(&["*"]));
}

#[test]
fn repeated_list_flags_reach_the_validated_options() {
    let o = parse(&["--controllers=cloud-node", "--controllers=service"]).validate("fake").expect("valid");
    assert!(o.controllers.contains(crate::controller_set::CLOUD_NODE), "{:?}", o.controllers);
    assert!(o.controllers.contains(crate::controller_set::SERVICE_LB), "{:?}", o.controllers);
    assert!(!o.controllers.contains(crate::controller_set::CLOUD_NODE_LIFECYCLE), "{:?}", o.controllers);
}

#[test]
fn cert_key_arrays_append_one_pair_per_occurrence() {
    let a = parse(&[
        "--tls-sni-cert-key=a.crt,a.key",
        "--tls-sni-cert-key=b.crt,b.key:b.example,*.b.example",
        "--webhook-tls-sni-cert-key=c.crt,c.key",
        "--webhook-tls-sni-cert-key=d.crt,d.key",
    ]);
    assert_eq!(a.serving.tls_sni_cert_key, strings(&["a.crt,a.key", "b.crt,b.key:b.example,*.b.example"]));
    assert_eq!(a.no_effect.webhook_tls_sni_cert_key, strings(&["c.crt,c.key", "d.crt,d.key"]));
}

#[test]
fn feature_gates_merge_across_occurrences_and_the_last_value_of_a_gate_wins() {
    let gate = WATCH_BASED_ROUTES_GATE;
    let base = ["--allocate-node-cidrs", "--cluster-cidr=10.244.0.0/16"];
    let mode = |extra: &[&str]| {
        let argv = [&base[..], extra].concat();
        parse(&argv).validate("fake").expect("valid").routes.expect("routes").mode
    };
    let off = format!("--feature-gates={gate}=false");
    let on = format!("--feature-gates={gate}=true");
    assert!(matches!(mode(&[&off]), ReconcileMode::Periodic { .. }));
    assert!(matches!(mode(&[&off, &on]), ReconcileMode::Watch { .. }));
    assert!(matches!(mode(&[&on, &off]), ReconcileMode::Periodic { .. }));
    // Another gate in a later occurrence does not reset the earlier one (a merge, not a replace).
    assert!(matches!(
        mode(&[&off, "--feature-gates=CloudControllerManagerWebhook=true"]),
        ReconcileMode::Periodic { .. }
    ));
    let o = parse(&["--feature-gates=SomeFutureGate=true", "--feature-gates=SomeFutureGate=false,OtherGate=true"])
        .validate("fake")
        .expect("valid");
    assert_eq!(
        o.warnings,
        strings(&[
            "--feature-gates: SomeFutureGate is not known here and has no effect",
            "--feature-gates: OtherGate is not known here and has no effect",
        ])
    );
    // A malformed occurrence is an error, wherever it is.
    let errors = parse(&[&on, "--feature-gates=NoValue"]).validate("fake").unwrap_err();
    assert!(errors.iter().any(|e| e.starts_with("--feature-gates: ") && e.contains("NoValue")), "{errors:?}");
}

#[test]
fn vmodule_occurrences_add_up() {
    let o = parse(&["--vmodule=cloud_controllers::route=4", "--vmodule=hcloud_provider=2"])
        .validate("fake")
        .expect("valid");
    assert_eq!(
        o.logging.vmodule,
        vec![
            VmoduleDirective { target: "cloud_controllers::route".to_owned(), verbosity: 4 },
            VmoduleDirective { target: "hcloud_provider".to_owned(), verbosity: 2 },
        ]
    );
}

#[test]
fn plain_value_flags_keep_the_last_occurrence() {
    let a = parse(&[
        "--cluster-name=one",
        "--cluster-name=two",
        "--cluster-cidr=10.0.0.0/8",
        "--cluster-cidr=10.244.0.0/16",
    ]);
    assert_eq!((a.cluster_name.as_str(), a.cluster_cidr.as_str()), ("two", "10.244.0.0/16"));
    let a = parse(&["--tls-min-version=VersionTLS12", "--tls-min-version=VersionTLS13"]);
    assert_eq!(a.serving.tls_min_version, "VersionTLS13");
}
