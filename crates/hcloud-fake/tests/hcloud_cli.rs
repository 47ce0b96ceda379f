//! Hetzner's own `hcloud` CLI (v1.67.0, built by `scripts/provision-oracles` from its release
//! sources) against the fake, as a person uses it: a context with the fake's endpoint, servers
//! with labels and selectors, power actions, networks with subnets and routes, Load Balancers
//! with services, targets, health checks and a network, certificates (uploaded and managed),
//! Primary IPs, in `-o json`, `-o columns=...` and the plain tables and descriptions.
//!
//! The CLI is the oracle: it is built on hcloud-go (Hetzner's Go library, the one the official
//! CCM uses), so a response it cannot decode, or an action it cannot wait for, is one the real
//! API does not give. Every step runs the CLI and asserts what it printed (the values it parsed,
//! not only its exit code). All steps run even if some fail; each failure is reported with the
//! CLI's output. If the CLI cannot be provisioned the test FAILS, it never skips.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "hcloud_cli/harness.rs"]
mod harness;
#[path = "hcloud_cli/load_balancers.rs"]
mod load_balancers;
#[path = "hcloud_cli/managing.rs"]
mod managing;
#[path = "hcloud_cli/resources.rs"]
mod resources;

use std::time::Duration;

use hcloud_fake::{FakeConfig, FakeServer};

use harness::{Cli, MIN_ASSERTIONS, MIN_STEPS};
use load_balancers::{load_balancers, primary_ips_and_cleanup};
use managing::{images, manage_certificates, manage_networks, manage_primary_ips, manage_servers, prices};
use resources::{catalog, certificates, context, networks, servers};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hetzners_cli_works_against_the_fake() {
    let binary = tokio::task::spawn_blocking(test_harness::oracle::hcloud_cli_binary)
        .await
        .expect("provisioning thread")
        .unwrap_or_else(|e| panic!("{e}. This test needs Hetzner's hcloud CLI and does not skip without it."));
    let config =
        FakeConfig { log_requests: false, ..FakeConfig::default().with_action_delay(Duration::from_millis(20)) };
    let fake = FakeServer::start(config).await.expect("fake starts");
    let endpoint = fake.base_url();
    let mut cli = Cli::new(binary);

    context(&mut cli, &endpoint).await;
    catalog(&mut cli).await;
    images(&mut cli).await;
    prices(&mut cli).await;
    servers(&mut cli).await;
    manage_servers(&mut cli).await;
    networks(&mut cli).await;
    manage_networks(&mut cli).await;
    certificates(&mut cli).await;
    manage_certificates(&mut cli).await;
    load_balancers(&mut cli).await;
    manage_primary_ips(&mut cli).await;
    primary_ips_and_cleanup(&mut cli).await;

    let unknown = fake.handle().request_counts();
    println!(
        "{} steps, {} assertions, {} failed; {} API requests",
        cli.steps,
        cli.assertions,
        cli.failures.len(),
        unknown.total
    );
    // Every error the fake answered must be one a step asked for: a request the CLI got an
    // error for and got over (an endpoint the fake lacks, say) would pass unnoticed otherwise.
    let errors: Vec<String> = fake
        .handle()
        .request_log()
        .iter()
        .filter(|r| r.status >= 400)
        .map(|r| format!("{} {} -> {} {}", r.method, r.path, r.status, r.error_code.as_deref().unwrap_or("")))
        .collect();
    println!("error answers: {}", errors.len());
    fake.shutdown().await;
    assert!(
        errors.len() <= cli.expected_failures,
        "the fake answered {} errors, but only {} steps expected a failure:\n  {}",
        errors.len(),
        cli.expected_failures,
        errors.join("\n  ")
    );
    assert!(cli.failures.is_empty(), "{} steps failed:\n  {}", cli.failures.len(), cli.failures.join("\n  "));
    assert!(cli.steps >= MIN_STEPS, "only {} steps ran (minimum {MIN_STEPS})", cli.steps);
    assert!(cli.assertions >= MIN_ASSERTIONS, "only {} assertions (minimum {MIN_ASSERTIONS})", cli.assertions);
}
