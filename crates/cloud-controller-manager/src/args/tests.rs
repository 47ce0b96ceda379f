//! Tests of the flags: upstream's defaults and validation cases, and ours.

use super::*;
use clap::Parser;
use ipnet::IpNet;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
}

fn parse(extra: &[&str]) -> Result<ManagerArgs, clap::Error> {
    let mut argv = vec!["ccm"];
    argv.extend_from_slice(extra);
    Cli::try_parse_from(argv).map(|c| c.manager)
}

fn valid(extra: &[&str]) -> Options {
    let mut argv = vec!["--cloud-provider=fake", "--allow-untagged-cloud"];
    argv.extend_from_slice(extra);
    parse(&argv).expect("parses").validate("fake").expect("valid")
}

/// Upstream `TestDefaultFlags` for the flags that exist here.
#[test]
fn test_default_flags() {
    let a = parse(&[]).expect("parses");
    assert_eq!(a.controllers, vec!["*"]);
    assert!(a.leader_elect);
    assert_eq!(a.leader_elect_lease_duration, Duration::from_secs(15));
    assert_eq!(a.leader_elect_renew_deadline, Duration::from_secs(10));
    assert_eq!(a.leader_elect_retry_period, Duration::from_secs(2));
    assert_eq!(a.leader_elect_resource_lock, "leases");
    assert_eq!(a.leader_elect_resource_name, "cloud-controller-manager");
    assert_eq!(a.leader_elect_resource_namespace, "kube-system");
    assert_eq!(a.min_resync_period, Duration::from_secs(12 * 3600));
    assert_eq!(a.kube_api_qps, 20.0);
    assert_eq!(a.kube_api_burst, 30);
    assert_eq!(a.node_monitor_period, Duration::from_secs(5));
    assert_eq!(a.node_status_update_frequency, Duration::from_secs(300));
    assert_eq!(a.concurrent_node_syncs, 1);
    assert_eq!(a.concurrent_node_status_updates, 0);
    assert_eq!(a.concurrent_service_syncs, 1);
    assert_eq!(a.cluster_name, "kubernetes");
    assert!(a.configure_cloud_routes);
    assert!(!a.allocate_node_cidrs);
    assert!(!a.allow_untagged_cloud);
    assert_eq!(a.route_reconciliation_period, Duration::from_secs(10));
    assert_eq!(a.route_resync_period, Duration::from_secs(240));
    assert_eq!(a.cluster_cidr, "");
    assert!(a.feature_gates.is_empty());
    assert_eq!(parse_feature_gates(&a.feature_gates.join(",")), Ok(FeatureGates::default()));
    assert!(FeatureGates::default().watch_based_routes, "watch-based routes by default, as the official chart");
    assert_eq!(a.bind_address, "0.0.0.0");
    assert_eq!(a.secure_port, 10258);
    assert_eq!((a.tls_cert_file, a.tls_private_key_file), (None, None));
}

#[test]
fn upstream_deployment_arguments_are_accepted() {
    let o = valid(&[
        "--route-reconciliation-period=30s",
        "--webhook-secure-port=0",
        "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
        "--allocate-node-cidrs=true",
        "--cluster-cidr=10.244.0.0/16",
        "--leader-elect=false",
    ]);
    assert_eq!(o.controllers, ControllerSet::all());
    assert_eq!((o.node.workers, o.node.status_workers), (1, 1));
    assert!(o.leader_election.is_none());
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    let routes = o.routes.expect("routes are configured");
    assert_eq!(routes.cluster_cidrs, vec!["10.244.0.0/16".parse::<IpNet>().expect("net")]);
    assert_eq!(o.cluster_name, "kubernetes");
    // Watch-based with the safety resync; the chart's 30s period is the periodic mode's.
    assert_eq!(routes.mode, ReconcileMode::Watch { resync: Duration::from_secs(240) });
    assert_eq!(routes.min_interval, Duration::from_secs(10));
}

#[test]
fn routes_need_both_flags_and_then_a_cluster_cidr() {
    assert!(valid(&[]).routes.is_none(), "upstream defaults: --allocate-node-cidrs=false, no routes");
    assert!(
        valid(&["--allocate-node-cidrs", "--configure-cloud-routes=false", "--cluster-cidr=10.0.0.0/8"])
            .routes
            .is_none()
    );
    assert!(valid(&["--cluster-cidr=10.244.0.0/16"]).routes.is_none());
    let errs = parse(&["--cloud-provider=fake", "--allow-untagged-cloud", "--allocate-node-cidrs=true"])
        .expect("parses")
        .validate("fake")
        .unwrap_err();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0]
            .starts_with("--cluster-cidr: required with --allocate-node-cidrs=true and --configure-cloud-routes=true"),
        "{errs:?}"
    );
}

#[test]
fn cluster_cidrs_are_one_or_a_dual_stack_pair() {
    let o = valid(&["--allocate-node-cidrs", "--cluster-cidr=10.244.0.0/16, fd00:10:244::/56", "--cluster-name=prod"]);
    let routes = o.routes.expect("routes");
    assert_eq!(o.cluster_name, "prod");
    assert_eq!(routes.cluster_cidrs.len(), 2);
    assert_eq!(routes.cluster_cidrs[1], "fd00:10:244::/56".parse::<IpNet>().expect("net"));
    // Host bits are dropped, as Go's ParseCIDR does.
    assert_eq!(parse_cluster_cidrs("10.244.3.1/16"), Ok(vec!["10.244.0.0/16".parse().expect("net")]));
    for (value, needle) in [
        ("10.244.0.0", "\"10.244.0.0\" is not a CIDR"),
        ("10.244.0.0/16,banana", "\"banana\" is not a CIDR"),
        ("10.244.0.0/16,10.245.0.0/16", "must be a dual-stack pair, one IPv4 and one IPv6"),
        ("10.244.0.0/16,fd00::/56,10.1.0.0/16", "at most two CIDRs"),
    ] {
        let e = parse_cluster_cidrs(value).unwrap_err();
        assert!(e.starts_with("--cluster-cidr: ") && e.contains(needle), "{value}: {e}");
        // Rejected at start-up whether or not routes are on.
        let flag = format!("--cluster-cidr={value}");
        let errs = parse(&["--cloud-provider=fake", "--allow-untagged-cloud", &flag])
            .expect("parses")
            .validate("fake")
            .unwrap_err();
        assert_eq!(errs, vec![e]);
    }
}

#[test]
fn the_watch_based_routes_gate_selects_the_mode() {
    let base = ["--allocate-node-cidrs", "--cluster-cidr=10.244.0.0/16"];
    let periodic = [
        &base[..],
        &[
            "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=false",
            "--route-reconciliation-period=30s",
        ],
    ]
    .concat();
    assert_eq!(
        valid(&periodic).routes.expect("routes").mode,
        ReconcileMode::Periodic { period: Duration::from_secs(30) }
    );
    let watch = [&base[..], &["--route-resync-period=2m30s"]].concat();
    assert_eq!(valid(&watch).routes.expect("routes").mode, ReconcileMode::Watch { resync: Duration::from_secs(150) });

    let gates = parse_feature_gates(" CloudControllerManagerWebhook=true , SomeFutureGate=false ").expect("valid");
    assert!(gates.watch_based_routes);
    assert_eq!(gates.unknown, vec!["SomeFutureGate".to_owned()]);
    let o = valid(&["--feature-gates=SomeFutureGate=true"]);
    assert_eq!(o.warnings, vec!["--feature-gates: SomeFutureGate is not known here and has no effect".to_owned()]);
    for (value, needle) in [
        ("CloudControllerManagerWatchBasedRoutesReconciliation", "is not Name=true|false"),
        ("CloudControllerManagerWatchBasedRoutesReconciliation=yes", "the value is not a boolean"),
    ] {
        let e = parse_feature_gates(value).unwrap_err();
        assert!(e.starts_with("--feature-gates: ") && e.contains(needle), "{e}");
    }
    let errs = parse(&["--cloud-provider=fake", "--allow-untagged-cloud", "--route-resync-period=0s"])
        .expect("parses")
        .validate("fake")
        .unwrap_err();
    assert_eq!(errs, vec!["--route-resync-period: must be greater than 0".to_owned()]);
}

#[test]
fn leader_election_options_follow_the_flags() {
    let o = valid(&[
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=4s",
        "--leader-elect-resource-name=my-ccm",
        "--leader-elect-resource-namespace=infra",
    ]);
    let le = o.leader_election.expect("on by default");
    assert_eq!(
        (le.lease_duration, le.renew_deadline, le.retry_period),
        (Duration::from_secs(30), Duration::from_secs(20), Duration::from_secs(4))
    );
    assert_eq!((le.name.as_str(), le.namespace.as_str()), ("my-ccm", "infra"));
}

/// `--dry-run` takes no Lease: leader election is off whatever `--leader-elect` says, with a
/// warning when it was on; without the flag nothing changes.
#[test]
fn a_dry_run_elects_no_leader() {
    let o = valid(&[]);
    assert!(!o.dry_run);
    assert!(o.leader_election.is_some());
    let o = valid(&["--dry-run"]);
    assert!(o.dry_run);
    assert!(o.leader_election.is_none(), "a dry run takes no Lease");
    assert_eq!(o.warnings.len(), 1, "{:?}", o.warnings);
    assert!(o.warnings[0].starts_with("--dry-run: leader election is off"), "{:?}", o.warnings);
    let o = valid(&["--dry-run=true", "--leader-elect=false"]);
    assert!(o.dry_run && o.leader_election.is_none());
    assert!(o.warnings.is_empty(), "nothing to warn about: {:?}", o.warnings);
    assert!(!valid(&["--dry-run=false"]).dry_run);
}

#[test]
fn leader_election_timing_rules_name_the_flags() {
    let errs = parse(&[
        "--cloud-provider=fake",
        "--allow-untagged-cloud",
        "--leader-elect-lease-duration=10s",
        "--leader-elect-renew-deadline=10s",
        "--leader-elect-retry-period=9s",
        "--leader-elect-resource-lock=configmaps",
    ])
    .expect("parses")
    .validate("fake")
    .unwrap_err();
    let text = errs.join("\n");
    for needle in [
        "--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)",
        "--leader-elect-renew-deadline (10s) must be greater than 1.2 x --leader-elect-retry-period (9s)",
        "--leader-elect-resource-lock: \"configmaps\" is not supported; only leases",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in {text}");
    }
    assert_eq!(errs.len(), 3, "{text}");
}

#[test]
fn unknown_flags_and_bad_values_are_rejected_before_start() {
    let e = parse(&["--no-such-flag"]).unwrap_err().to_string();
    assert!(e.contains("--no-such-flag"), "{e}");
    let e = parse(&["--node-monitor-period=5 seconds"]).unwrap_err().to_string();
    assert!(e.contains("not a duration"), "{e}");
    let e = parse(&["--leader-elect=maybe"]).unwrap_err().to_string();
    assert!(e.contains("not a boolean"), "{e}");
    let e = parse(&["--kube-api-qps=fast"]).unwrap_err().to_string();
    assert!(e.contains("--kube-api-qps"), "{e}");
}

#[test]
fn semantic_errors_are_collected() {
    let errs = parse(&[
        "--cloud-provider=aws",
        "--concurrent-node-syncs=0",
        "--controllers=*,bogus",
        "--kube-api-qps=0",
        "--bind-address=everywhere",
        "--tls-cert-file=/tmp/cert.pem",
    ])
    .expect("parses")
    .validate("fake")
    .unwrap_err();
    let text = errs.join("\n");
    for needle in [
        "--cloud-provider: \"aws\" is not supported",
        "--allow-untagged-cloud: required",
        "concurrent-node-syncs must be a positive number",
        "unknown controller(s) bogus",
        "--kube-api-qps: must be a positive number",
        "--bind-address: \"everywhere\" is not an IP address",
        "--tls-private-key-file: required with --tls-cert-file",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in {text}");
    }
    assert_eq!(errs.len(), 7, "{text}");
}

#[test]
fn service_controller_options_follow_the_flags() {
    let o = valid(&[]);
    assert_eq!((o.service.workers, o.service_config().cluster_name.as_str()), (1, "kubernetes"));
    assert_eq!(o.service.load_balancer_class, None, "upstream's behaviour by default");
    let o =
        valid(&["--concurrent-service-syncs=4", "--cluster-name=prod", "--load-balancer-class=example.com/cloud-lb"]);
    assert_eq!(o.service.workers, 4);
    assert_eq!(o.service_config().cluster_name, "prod");
    assert_eq!(o.service.load_balancer_class.as_deref(), Some("example.com/cloud-lb"));
    let o = valid(&["--load-balancer-class="]);
    assert_eq!(o.service.load_balancer_class, None, "empty means unset");
}

#[test]
fn service_controller_flags_are_validated() {
    let errs = parse(&[
        "--cloud-provider=fake",
        "--allow-untagged-cloud",
        "--concurrent-service-syncs=0",
        "--load-balancer-class=Example.com/x",
    ])
    .expect("parses")
    .validate("fake")
    .unwrap_err();
    assert_eq!(
        errs,
        vec![
            "--concurrent-service-syncs: must be a positive number".to_owned(),
            "--load-balancer-class: \"Example.com/x\" is not a valid class: the prefix \"Example.com\" must be a \
             lowercase DNS subdomain (a label-style key like example.com/cloud-lb)"
                .to_owned(),
        ]
    );
    for bad in ["a/b/c", "-x", "x-", "/x", "example.com/", &"n".repeat(64), "bad name"] {
        assert!(validate_qualified_name(bad).is_err(), "{bad:?}");
    }
    for good in ["x", "example.com/cloud-lb", "lb.k8s.io/a_b.c-d", "a1"] {
        assert_eq!(validate_qualified_name(good), Ok(()), "{good:?}");
    }
}

#[test]
fn status_workers_default_to_sync_workers() {
    let o = valid(&["--concurrent-node-syncs=7"]);
    assert_eq!((o.node.workers, o.node.status_workers), (7, 7));
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
}

/// Upstream `TestNodeControllerValidation`.
#[test]
fn test_node_controller_validation() {
    let cases: [(&str, i64, i64, &[&str]); 6] = [
        ("empty options", 1, 0, &[]),
        ("concurrent-node-syncs negative value", -5, 0, &["concurrent-node-syncs must be a positive number"]),
        ("concurrent-node-syncs zero value", 0, 0, &["concurrent-node-syncs must be a positive number"]),
        ("concurrent-node-syncs positive value, concurrent-node-status-updates default 0", 5, 0, &[]),
        ("concurrent-node-syncs positive value, concurrent-node-status-updates positive value", 5, 5, &[]),
        (
            "concurrent-node-syncs positive value, concurrent-node-status-updates negative value",
            5,
            -1,
            &["concurrent-node-status-updates cannot be a negative number"],
        ),
    ];
    for (name, syncs, updates, expected) in cases {
        assert_eq!(validate_node_controller(syncs, updates), expected, "case {name:?}");
    }
}

/// Upstream `NodeLifecycleControllerOptions` (1.37): `--concurrent-node-lifecycle-syncs`,
/// at least 1, with upstream's error text; `--node-monitor-period` moved beside it.
#[test]
fn node_lifecycle_controller_options_follow_the_flags() {
    let o = valid(&[]);
    assert_eq!(o.node_lifecycle, NodeLifecycleConfig { monitor_period: Duration::from_secs(5), workers: 16 });
    let o = valid(&["--concurrent-node-lifecycle-syncs=3", "--node-monitor-period=7s"]);
    assert_eq!(o.node_lifecycle, NodeLifecycleConfig { monitor_period: Duration::from_secs(7), workers: 3 });
    assert_eq!(NodeLifecycleConfig::default().workers, 1, "upstream's default in the generic configuration");
    for (value, expected) in [(0, "concurrent-node-lifecycle-syncs must be at least 1, but got 0"), (-2, "but got -2")]
    {
        let errors = parse(&[
            "--cloud-provider=fake",
            "--allow-untagged-cloud",
            &format!("--concurrent-node-lifecycle-syncs={value}"),
        ])
        .expect("parses")
        .validate("fake")
        .unwrap_err();
        assert!(errors.iter().any(|e| e.contains(expected)), "{errors:?}");
    }
    assert!(validate_node_lifecycle_controller(1).is_empty());
}

#[test]
fn logging_format_is_upstreams_name_for_log_format_and_vmodule_maps_to_targets() {
    assert_eq!(valid(&[]).logging.format, LogFormat::Plain);
    assert_eq!(valid(&["--logging-format=json"]).logging.format, LogFormat::Json);
    assert_eq!(valid(&["--log-format=json", "--logging-format=text"]).logging.format, LogFormat::Plain);
    assert!(parse(&["--logging-format=yaml"]).is_err());
    let options = valid(&["--vmodule=cloud_controllers::route=4,route_controller*.go=5", "--log-flush-frequency=1s"]);
    assert_eq!(
        options.logging.vmodule,
        vec![VmoduleDirective { target: "cloud_controllers::route".to_owned(), verbosity: 4 }]
    );
    assert_eq!(options.warnings.len(), 1, "{:?}", options.warnings);
    assert!(options.warnings[0].contains("route_controller*.go"), "{:?}", options.warnings);
    let errors = parse(&["--cloud-provider=fake", "--allow-untagged-cloud", "--vmodule=x", "--log-flush-frequency=0s"])
        .expect("parses")
        .validate("fake")
        .unwrap_err();
    assert_eq!(errors.len(), 2, "{errors:?}");
}

#[test]
fn tls_flags_take_go_names_and_refuse_others_naming_the_accepted_ones() {
    let options = valid(&[
        "--tls-min-version=VersionTLS13",
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_RSA_WITH_AES_128_CBC_SHA",
        "--tls-curve-preferences=X25519,23",
        "--disable-http2-serving",
        "--http2-max-streams-per-connection=7",
    ]);
    assert_eq!(options.serving.tls.min_version, controller_serving::TlsVersion::Tls13);
    assert_eq!(options.serving.tls.cipher_suites, Some(vec![0xc02f]));
    assert_eq!(options.serving.tls.curves, Some(vec![29, 23]));
    assert!(!options.serving.http2);
    assert_eq!(options.serving.http2_max_streams, 7);
    assert_eq!(options.warnings.len(), 1, "{:?}", options.warnings);
    assert!(options.warnings[0].contains("TLS_RSA_WITH_AES_128_CBC_SHA"), "{:?}", options.warnings);
    let errors = parse(&["--cloud-provider=fake", "--allow-untagged-cloud", "--tls-min-version=TLS1.2"])
        .expect("parses")
        .validate("fake")
        .unwrap_err();
    assert_eq!(
        errors,
        vec![
            "--tls-min-version: \"TLS1.2\" is not a TLS version; accepted: VersionTLS10, VersionTLS11, VersionTLS12, \
             VersionTLS13"
                .to_owned()
        ]
    );
}

#[test]
fn sni_certificates_repeat_and_malformed_ones_are_errors() {
    let options = valid(&["--tls-sni-cert-key=a.crt,a.key", "--tls-sni-cert-key=b.crt,b.key:*.b.example"]);
    let names: Vec<_> = options.serving.sni_certificates.iter().map(|s| s.names.clone()).collect();
    assert_eq!(names, vec![Vec::<String>::new(), vec!["*.b.example".to_owned()]]);
    let errors = parse(&["--cloud-provider=fake", "--allow-untagged-cloud", "--tls-sni-cert-key=a.crt"])
        .expect("parses")
        .validate("fake")
        .unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("--tls-sni-cert-key: \"a.crt\""), "{errors:?}");
}
