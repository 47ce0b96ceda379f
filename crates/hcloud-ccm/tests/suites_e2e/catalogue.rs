//! Which tests of the two suites run, which are skipped and why (docs/e2e-suites.md shows the
//! same lists; a unit test below keeps the two in step).

/// Kubernetes' own tests that create `type: LoadBalancer` Services (v1.37.2's `test/e2e`): the
/// `[sig-network] LoadBalancers` tests and the Service and Deployment tests with Load Balancers,
/// by the text that ends their names. Ginkgo's focus is built from them.
pub const UPSTREAM_TESTS: &[&str] = &[
    // test/e2e/network/loadbalancer.go, "LoadBalancers"
    "should be able to change the type and ports of a TCP service",
    "should be able to change the type and ports of a UDP service",
    "should only allow access from service loadbalancer source ranges",
    "should have session affinity work for LoadBalancer service with Local traffic policy",
    "should be able to switch session affinity for LoadBalancer service with Local traffic policy",
    "should have session affinity work for LoadBalancer service with Cluster traffic policy",
    "should be able to switch session affinity for LoadBalancer service with Cluster traffic policy",
    "should handle load balancer cleanup finalizer for service",
    "should be able to create LoadBalancer Service without NodePort and change it",
    "should be able to preserve UDP traffic when server pod cycles for a LoadBalancer service on different nodes",
    "should be able to preserve UDP traffic when server pod cycles for a LoadBalancer service on the same nodes",
    "should not have connectivity disruption during rolling update with externalTrafficPolicy=Cluster",
    "should not have connectivity disruption during rolling update with externalTrafficPolicy=Local",
    // test/e2e/network/loadbalancer.go, "LoadBalancers ExternalTrafficPolicy: Local"
    "should work for type=LoadBalancer",
    "should only target nodes with endpoints",
    "should target all nodes with endpoints",
    "should work from pods",
    // test/e2e/network/service.go
    "should complete a service status lifecycle",
    "should fail health check node port if there are only terminating endpoints",
    "should serve endpoints on same port and different protocol for internal traffic on Type LoadBalancer",
    "should implement NodePort and HealthCheckNodePort correctly when ExternalTrafficPolicy changes",
    // test/e2e/apps/deployment.go ([Provider:aws,azure,gce]: run with --provider=aws, the null
    // provider cloud-provider-kind's CI uses so that it is not skipped)
    "should not disrupt a cloud load-balancer's connectivity during rollout",
];

/// The upstream tests skipped by name, with the reason: what cannot apply to Hetzner.
pub const UPSTREAM_SKIPS: &[(&str, &str)] = &[
    (
        "should be able to change the type and ports of a UDP service",
        "Hetzner Load Balancers have no UDP (a service is tcp, http or https); the official CCM leaves a UDP port out with an UnsupportedProtocolConfigured Warning",
    ),
    (
        "should be able to preserve UDP traffic when server pod cycles for a LoadBalancer service on different nodes",
        "UDP, as above",
    ),
    (
        "should be able to preserve UDP traffic when server pod cycles for a LoadBalancer service on the same nodes",
        "UDP, as above",
    ),
    (
        "should only allow access from service loadbalancer source ranges",
        "Hetzner Load Balancers cannot filter clients by address; the official CCM ignores spec.loadBalancerSourceRanges",
    ),
    (
        "should have session affinity work for LoadBalancer service with Local traffic policy",
        "a Hetzner Load Balancer has no client-IP affinity (a tcp service spreads a client's connections over its targets, round_robin or least_connections; sticky sessions exist only for http services, by cookie), and each node's kube-proxy keeps its own ClientIP affinity, so one client reaches different pods; the official CCM ignores spec.sessionAffinity and fails these too (one can pass by chance while a single target is healthy)",
    ),
    (
        "should be able to switch session affinity for LoadBalancer service with Local traffic policy",
        "session affinity, as above",
    ),
    (
        "should have session affinity work for LoadBalancer service with Cluster traffic policy",
        "session affinity, as above",
    ),
    (
        "should be able to switch session affinity for LoadBalancer service with Cluster traffic policy",
        "session affinity, as above",
    ),
    (
        "should be able to create LoadBalancer Service without NodePort and change it",
        "a Hetzner Load Balancer forwards to the nodes' NodePorts: a Service without NodePorts (allocateLoadBalancerNodePorts: false) has nothing to forward to, and the official CCM fails to sync it",
    ),
];

/// The upstream tests CI runs (`cargo test --workspace`); the rest runs in the full run
/// (`scripts/e2e-suites`), whose last result is in docs/e2e-suites.md.
pub const UPSTREAM_CI: &[&str] = &[
    "should be able to change the type and ports of a TCP service",
    "should handle load balancer cleanup finalizer for service",
    "should work for type=LoadBalancer",
    "should only target nodes with endpoints",
    "should work from pods",
    "should complete a service status lifecycle",
];

/// The official CCM's e2e tests (`tests/e2e` of v1.35.0, build tag `e2e`, not `robot`).
pub const OFFICIAL_TESTS: &[&str] = &[
    "TestPodIsPresent",
    "TestNodeSetCorrectNodeLabelsAndIPAddresses",
    "TestServiceLoadBalancersMinimalSetup",
    "TestServiceLoadBalancersHTTPS",
    "TestServiceLoadBalancersHTTPSWithManagedCertificate",
    "TestServiceLoadBalancersWithPrivateNetwork",
    "TestRouteNetworksPodIPsAreAccessible",
];

/// The official tests skipped by name, with the reason.
pub const OFFICIAL_SKIPS: &[(&str, &str)] = &[(
    "TestPodIsPresent",
    "checks how the CCM was deployed (a Pod of Hetzner's chart in kube-system), not what it does; the lab runs each CCM as a process, as every suite here does (the chart is tested by crates/test-harness/tests/deploy.rs)",
)];

/// The reason an upstream test is skipped, if it is.
pub fn upstream_skip(test: &str) -> Option<&'static str> {
    UPSTREAM_SKIPS.iter().find(|(name, _)| test.contains(name)).map(|(_, why)| *why)
}

/// The reason an official test is skipped, if it is.
pub fn official_skip(test: &str) -> Option<&'static str> {
    OFFICIAL_SKIPS.iter().find(|(name, _)| *name == test).map(|(_, why)| *why)
}

/// A ginkgo regular expression matching any of `names` (their regex characters escaped).
pub fn any_of(names: &[&str]) -> String {
    let escaped: Vec<String> = names
        .iter()
        .map(|n| n.chars().flat_map(|c| if "\\.+*?()|[]{}^$".contains(c) { vec!['\\', c] } else { vec![c] }).collect())
        .collect();
    escaped.join("|")
}

#[test]
fn every_skip_is_a_listed_test_with_a_reason_and_ci_runs_no_skipped_test() {
    for (name, why) in UPSTREAM_SKIPS {
        assert!(UPSTREAM_TESTS.contains(name), "{name} is skipped but not in the list");
        assert!(why.len() > 10, "{name}: a reason");
    }
    for (name, why) in OFFICIAL_SKIPS {
        assert!(OFFICIAL_TESTS.contains(name), "{name} is skipped but not in the list");
        assert!(why.len() > 10, "{name}: a reason");
    }
    for name in UPSTREAM_CI {
        assert!(UPSTREAM_TESTS.contains(name) && upstream_skip(name).is_none(), "{name}");
    }
    assert_eq!(any_of(&["a.b (c)", "d|e"]), r"a\.b \(c\)|d\|e");
}

#[test]
fn the_documentation_lists_every_test_and_every_skip_reason() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/e2e-suites.md"))
        .expect("docs/e2e-suites.md");
    for name in UPSTREAM_TESTS.iter().chain(OFFICIAL_TESTS) {
        assert!(doc.contains(name), "docs/e2e-suites.md does not name {name}");
    }
    for (name, why) in UPSTREAM_SKIPS.iter().chain(OFFICIAL_SKIPS) {
        assert!(doc.contains(why), "docs/e2e-suites.md does not give the reason for skipping {name}: {why}");
    }
}
