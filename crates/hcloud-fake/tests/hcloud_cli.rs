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

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use hcloud_fake::{FakeConfig, FakeServer};
use serde_json::Value;

/// A token the CLI accepts (it checks for exactly 64 characters).
const TOKEN: &str = "clitoken00000000000000000000000000000000000000000000000000000000";
/// The scenario must run at least this many steps and this many assertions.
const MIN_STEPS: usize = 40;
const MIN_ASSERTIONS: usize = 120;
/// No single CLI run may take longer (the fake's actions take 20 ms).
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// What one CLI run printed.
struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// The CLI with a private config file (its contexts), run against the fake.
struct Cli {
    binary: PathBuf,
    config: PathBuf,
    _dir: tempfile::TempDir,
    /// `hcloud <args>` of the step running now, for failure messages.
    current: String,
    assertions: usize,
    failures: Vec<String>,
    steps: usize,
}

/// A failed check inside a step.
type Check = Result<(), String>;

impl Cli {
    fn new(binary: PathBuf) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("cli.toml");
        Self { binary, config, _dir: dir, current: String::new(), assertions: 0, failures: Vec::new(), steps: 0 }
    }

    /// Runs `hcloud --config <ours> <args>` with only the environment we give it (no
    /// `HCLOUD_*` from the test process), `extra_env` added.
    async fn run_with_env(&mut self, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        self.current = format!("hcloud {}", args.join(" "));
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.arg("--config").arg(&self.config).args(args);
        cmd.env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default()).env("HOME", self._dir.path());
        cmd.env("NO_COLOR", "1");
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        let out = tokio::time::timeout(STEP_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("`{}` did not finish within {STEP_TIMEOUT:?}", self.current))
            .expect("the CLI ran");
        Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn run(&mut self, args: &[&str]) -> Output {
        self.run_with_env(args, &[]).await
    }

    /// Runs a step: the CLI must succeed; `check` then inspects what it printed.
    async fn step(&mut self, args: &[&str], check: impl FnOnce(&Output, &mut Asserts) -> Check) {
        let out = self.run(args).await;
        self.finish_step(out, check);
    }

    /// [`Cli::step`] with `-o json` appended; `check` gets the parsed document.
    async fn json(&mut self, args: &[&str], check: impl FnOnce(&Value, &mut Asserts) -> Check) {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-o", "json"]);
        let out = self.run(&all).await;
        self.finish_step(out, |out, a| {
            let doc: Value = serde_json::from_str(&out.stdout)
                .map_err(|e| format!("the output is not JSON ({e}): {}", out.stdout))?;
            check(&doc, a)
        });
    }

    /// A step that must fail (the CLI's exit status is not 0); `check` inspects stderr.
    async fn fails(&mut self, args: &[&str], check: impl FnOnce(&Output, &mut Asserts) -> Check) {
        let out = self.run(args).await;
        self.steps += 1;
        let mut asserts = Asserts::default();
        let result = if out.ok {
            Err(format!("expected a failure, it succeeded: {}", out.stdout))
        } else {
            check(&out, &mut asserts)
        };
        self.record(result, &out, asserts);
    }

    fn finish_step(&mut self, out: Output, check: impl FnOnce(&Output, &mut Asserts) -> Check) {
        self.steps += 1;
        let mut asserts = Asserts::default();
        let result = if out.ok { check(&out, &mut asserts) } else { Err("the CLI failed".to_owned()) };
        self.record(result, &out, asserts);
    }

    fn record(&mut self, result: Check, out: &Output, asserts: Asserts) {
        self.assertions += asserts.0;
        match result {
            Ok(()) => println!("ok    {} ({} assertions)", self.current, asserts.0),
            Err(e) => {
                println!("FAIL  {}: {e}", self.current);
                self.failures.push(format!(
                    "`{}`: {e}\n      stdout: {}\n      stderr: {}",
                    self.current,
                    out.stdout.trim(),
                    out.stderr.trim()
                ));
            }
        }
    }
}

/// Counts assertions of a step.
#[derive(Default)]
struct Asserts(usize);

impl Asserts {
    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, actual: T, expected: T) -> Check {
        self.0 += 1;
        if actual == expected { Ok(()) } else { Err(format!("{what}: got {actual:?}, expected {expected:?}")) }
    }

    fn that(&mut self, what: &str, ok: bool) -> Check {
        self.0 += 1;
        if ok { Ok(()) } else { Err(format!("not true: {what}")) }
    }

    fn contains(&mut self, what: &str, haystack: &str, needle: &str) -> Check {
        self.0 += 1;
        if haystack.contains(needle) { Ok(()) } else { Err(format!("{what} lacks {needle:?}: {haystack}")) }
    }
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// Names of the objects of a JSON array, sorted.
fn names(doc: &Value) -> Vec<String> {
    let mut names: Vec<String> =
        doc.as_array().map(|a| a.iter().map(|o| s(&o["name"]).to_owned()).collect()).unwrap_or_default();
    names.sort();
    names
}

/// The rows of a `-o columns=...` table without its header, split on whitespace.
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines().skip(1).map(|l| l.split_whitespace().map(str::to_owned).collect()).collect()
}

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
    servers(&mut cli).await;
    networks(&mut cli).await;
    certificates(&mut cli).await;
    load_balancers(&mut cli).await;
    primary_ips_and_cleanup(&mut cli).await;

    let unknown = fake.handle().request_counts();
    println!(
        "{} steps, {} assertions, {} failed; {} API requests",
        cli.steps,
        cli.assertions,
        cli.failures.len(),
        unknown.total
    );
    fake.shutdown().await;
    assert!(cli.failures.is_empty(), "{} steps failed:\n  {}", cli.failures.len(), cli.failures.join("\n  "));
    assert!(cli.steps >= MIN_STEPS, "only {} steps ran (minimum {MIN_STEPS})", cli.steps);
    assert!(cli.assertions >= MIN_ASSERTIONS, "only {} assertions (minimum {MIN_ASSERTIONS})", cli.assertions);
}

/// A context with the fake's token and endpoint, as `hcloud context create` writes it.
async fn context(cli: &mut Cli, endpoint: &str) {
    let out = cli.run_with_env(&["context", "create", "fake", "--token-from-env"], &[("HCLOUD_TOKEN", TOKEN)]).await;
    cli.finish_step(out, |o, a| a.contains("context create", &o.stdout, "Context fake created and activated"));
    cli.step(&["config", "set", "endpoint", endpoint], |_, _| Ok(())).await;
    cli.step(&["context", "active"], |o, a| a.eq("active context", o.stdout.trim(), "fake")).await;
    let config = std::fs::read_to_string(&cli.config).unwrap_or_default();
    cli.steps += 1;
    let mut a = Asserts::default();
    let result =
        a.contains("the config file", &config, endpoint).and_then(|()| a.contains("the config file", &config, TOKEN));
    let out = Output { ok: true, stdout: config.clone(), stderr: String::new() };
    cli.current = "the context's config file".to_owned();
    cli.record(result, &out, a);
}

async fn catalog(cli: &mut Cli) {
    cli.json(&["location", "list"], |doc, a| {
        a.that(
            "fsn1 and nbg1 are listed",
            names(doc).iter().any(|n| n == "fsn1") && names(doc).iter().any(|n| n == "nbg1"),
        )?;
        let fsn1 = doc.as_array().and_then(|l| l.iter().find(|o| o["name"] == "fsn1")).cloned().unwrap_or_default();
        a.eq("fsn1's network zone", s(&fsn1["network_zone"]), "eu-central")?;
        a.eq("fsn1's country", s(&fsn1["country"]), "DE")
    })
    .await;
    cli.json(&["server-type", "describe", "cx23"], |doc, a| {
        a.eq("cores", doc["cores"].as_u64(), Some(2))?;
        a.eq("disk (an integer: hcloud-go refuses 40.0)", doc["disk"].as_u64(), Some(40))?;
        a.eq("architecture", s(&doc["architecture"]), "x86")
    })
    .await;
    cli.step(&["server-type", "list", "-o", "columns=name,cores,memory,disk"], |o, a| {
        let cx23 = rows(&o.stdout).into_iter().find(|r| r.first().is_some_and(|n| n == "cx23")).unwrap_or_default();
        a.eq("the cx23 row", cx23.join(" "), "cx23 2 4.0 GB 40 GB".to_owned())
    })
    .await;
    cli.json(&["load-balancer-type", "list"], |doc, a| {
        a.that("lb11 is listed", names(doc).iter().any(|n| n == "lb11"))?;
        let lb11 = doc.as_array().and_then(|l| l.iter().find(|o| o["name"] == "lb11")).cloned().unwrap_or_default();
        a.eq("lb11's max services", lb11["max_services"].as_u64(), Some(5))
    })
    .await;
    cli.step(&["image", "list", "--type", "system", "-o", "columns=name,architecture"], |o, a| {
        a.that(
            "ubuntu-24.04 for x86 is listed",
            rows(&o.stdout).iter().any(|r| r.len() == 2 && r[0] == "ubuntu-24.04" && r[1] == "x86"),
        )
    })
    .await;
}

async fn servers(cli: &mut Cli) {
    for (name, role) in [("web-1", "web"), ("web-2", "web"), ("db-1", "db")] {
        let label = format!("role={role}");
        cli.step(
            &[
                "server",
                "create",
                "--name",
                name,
                "--type",
                "cx23",
                "--image",
                "ubuntu-24.04",
                "--location",
                "fsn1",
                "--label",
                &label,
                "--label",
                "env=test",
            ],
            |o, a| {
                a.contains("create output", &o.stdout, "Server ")
                    .and_then(|()| a.contains("create output", &o.stdout, "created"))
            },
        )
        .await;
    }
    cli.json(&["server", "list", "-l", "role=web"], |doc, a| {
        a.eq("servers with role=web", names(doc), vec!["web-1".to_owned(), "web-2".to_owned()])
    })
    .await;
    cli.json(&["server", "list", "-l", "role!=web,env=test"], |doc, a| {
        a.eq("role!=web,env=test", names(doc), vec!["db-1".to_owned()])
    })
    .await;
    cli.step(
        &["server", "list", "-o", "columns=name,status,location,type", "-o", "noheader", "--sort", "name:asc"],
        |o, a| {
            let lines: Vec<&str> = o.stdout.lines().collect();
            a.eq("three rows", lines.len(), 3)?;
            a.eq("first row", lines[0].split_whitespace().collect::<Vec<_>>(), vec!["db-1", "running", "fsn1", "cx23"])
        },
    )
    .await;
    cli.json(&["server", "describe", "web-1"], |doc, a| {
        a.eq("name", s(&doc["name"]), "web-1")?;
        a.eq("status", s(&doc["status"]), "running")?;
        a.eq("type", s(&doc["server_type"]["name"]), "cx23")?;
        a.eq("location", s(&doc["location"]["name"]), "fsn1")?;
        a.eq("image", s(&doc["image"]["name"]), "ubuntu-24.04")?;
        a.eq("label role", s(&doc["labels"]["role"]), "web")?;
        a.that(
            "a public IPv4",
            doc["public_net"]["ipv4"]["ip"].as_str().is_some_and(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok()),
        )?;
        a.that("a public IPv6 /64", s(&doc["public_net"]["ipv6"]["ip"]).ends_with("/64"))
    })
    .await;
    cli.step(&["server", "describe", "web-1"], |o, a| {
        a.contains("description", &o.stdout, "Name:")?;
        a.contains("description", &o.stdout, "web-1")?;
        a.contains("description", &o.stdout, "cx23")
    })
    .await;
    cli.step(&["server", "ip", "web-1"], |o, a| {
        a.that("an IPv4", o.stdout.trim().parse::<std::net::Ipv4Addr>().is_ok())
    })
    .await;
    cli.step(&["server", "add-label", "web-1", "tier=frontend"], |_, _| Ok(())).await;
    cli.json(&["server", "describe", "web-1"], |doc, a| a.eq("label tier", s(&doc["labels"]["tier"]), "frontend"))
        .await;
    cli.step(&["server", "remove-label", "web-1", "tier"], |_, _| Ok(())).await;
    cli.json(&["server", "describe", "web-1"], |doc, a| {
        a.that("label tier is gone", doc["labels"].get("tier").is_none())?;
        a.eq("label role stays", s(&doc["labels"]["role"]), "web")
    })
    .await;
    cli.step(&["server", "poweroff", "web-2"], |o, a| a.contains("poweroff output", &o.stdout, "stopped")).await;
    cli.json(&["server", "describe", "web-2"], |doc, a| a.eq("status after poweroff", s(&doc["status"]), "off")).await;
    cli.step(&["server", "poweron", "web-2"], |o, a| a.contains("poweron output", &o.stdout, "started")).await;
    cli.json(&["server", "describe", "web-2"], |doc, a| a.eq("status after poweron", s(&doc["status"]), "running"))
        .await;
    cli.fails(&["server", "describe", "no-such-server"], |o, a| a.contains("error", &o.stderr, "not found")).await;
}

async fn networks(cli: &mut Cli) {
    cli.step(&["network", "create", "--name", "k8s", "--ip-range", "10.0.0.0/8", "--label", "env=test"], |o, a| {
        a.contains("create output", &o.stdout, "created")
    })
    .await;
    cli.step(
        &[
            "network",
            "add-subnet",
            "k8s",
            "--type",
            "cloud",
            "--network-zone",
            "eu-central",
            "--ip-range",
            "10.0.0.0/24",
        ],
        |_, _| Ok(()),
    )
    .await;
    cli.step(&["server", "attach-to-network", "web-1", "--network", "k8s", "--ip", "10.0.0.2"], |_, _| Ok(())).await;
    cli.step(&["server", "attach-to-network", "web-2", "--network", "k8s"], |_, _| Ok(())).await;
    cli.step(
        &["network", "add-route", "k8s", "--destination", "10.244.1.0/24", "--gateway", "10.0.0.2"],
        |_, _| Ok(()),
    )
    .await;
    cli.json(&["network", "describe", "k8s"], |doc, a| {
        a.eq("ip range", s(&doc["ip_range"]), "10.0.0.0/8")?;
        a.eq("subnets", doc["subnets"].as_array().map(Vec::len), Some(1))?;
        a.eq("subnet gateway", s(&doc["subnets"][0]["gateway"]), "10.0.0.1")?;
        a.eq(
            "routes",
            doc["routes"].clone(),
            serde_json::json!([{"destination": "10.244.1.0/24", "gateway": "10.0.0.2"}]),
        )?;
        a.eq("servers", doc["servers"].as_array().map(Vec::len), Some(2))
    })
    .await;
    cli.json(&["server", "describe", "web-1"], |doc, a| {
        a.eq("private IP", s(&doc["private_net"][0]["ip"]), "10.0.0.2")
    })
    .await;
    cli.step(&["network", "describe", "k8s"], |o, a| {
        a.contains("description", &o.stdout, "10.244.1.0/24")?;
        a.contains("description", &o.stdout, "eu-central")
    })
    .await;
    cli.step(&["network", "list", "-l", "env=test", "-o", "columns=name,ip_range,servers"], |o, a| {
        a.eq(
            "rows",
            rows(&o.stdout),
            vec![vec!["k8s".to_owned(), "10.0.0.0/8".to_owned(), "2".to_owned(), "servers".to_owned()]],
        )
    })
    .await;
    cli.step(&["network", "remove-route", "k8s", "--destination", "10.244.1.0/24", "--gateway", "10.0.0.2"], |_, _| {
        Ok(())
    })
    .await;
    cli.json(&["network", "describe", "k8s"], |doc, a| {
        a.eq("routes after removal", doc["routes"].as_array().map(Vec::len), Some(0))
    })
    .await;
}

async fn certificates(cli: &mut Cli) {
    let cert = fixtures().join("test-only-cert.pem");
    let key = fixtures().join("test-only-key.pem");
    let (cert, key) = (cert.to_string_lossy().into_owned(), key.to_string_lossy().into_owned());
    cli.step(&["certificate", "create", "--name", "uploaded", "--cert-file", &cert, "--key-file", &key], |o, a| {
        a.contains("create output", &o.stdout, "created")
    })
    .await;
    cli.step(
        &["certificate", "create", "--name", "managed", "--type", "managed", "--domain", "example.com"],
        |o, a| a.contains("create output", &o.stdout, "created"),
    )
    .await;
    cli.json(&["certificate", "describe", "uploaded"], |doc, a| {
        a.eq("type", s(&doc["type"]), "uploaded")?;
        a.that(
            "domain names",
            doc["domain_names"].as_array().is_some_and(|d| d.iter().any(|n| n == "fake.example.com")),
        )?;
        a.that("a fingerprint", s(&doc["fingerprint"]).contains(':'))
    })
    .await;
    cli.json(&["certificate", "describe", "managed"], |doc, a| {
        a.eq("type", s(&doc["type"]), "managed")?;
        a.eq("issuance", s(&doc["status"]["issuance"]), "completed")
    })
    .await;
    cli.step(&["certificate", "list", "-o", "columns=name,type,domain_names"], |o, a| {
        let names: Vec<String> = rows(&o.stdout).into_iter().filter_map(|r| r.first().cloned()).collect();
        a.eq("names", names, vec!["uploaded".to_owned(), "managed".to_owned()])
    })
    .await;
}

async fn load_balancers(cli: &mut Cli) {
    cli.step(
        &[
            "load-balancer",
            "create",
            "--name",
            "lb-1",
            "--type",
            "lb11",
            "--location",
            "fsn1",
            "--label",
            "env=test",
            "--algorithm-type",
            "round_robin",
        ],
        |o, a| a.contains("create output", &o.stdout, "created"),
    )
    .await;
    cli.step(&["load-balancer", "attach-to-network", "lb-1", "--network", "k8s", "--ip", "10.0.0.10"], |_, _| Ok(()))
        .await;
    cli.step(
        &[
            "load-balancer",
            "add-service",
            "lb-1",
            "--protocol",
            "tcp",
            "--listen-port",
            "80",
            "--destination-port",
            "30080",
        ],
        |_, _| Ok(()),
    )
    .await;
    cli.step(
        &[
            "load-balancer",
            "add-service",
            "lb-1",
            "--protocol",
            "https",
            "--listen-port",
            "443",
            "--destination-port",
            "30443",
            "--http-certificates",
            "uploaded",
            "--http-sticky-sessions",
            "--http-cookie-name",
            "SRV",
            "--http-cookie-lifetime",
            "10m",
            "--http-timeout-idle",
            "60s",
        ],
        |_, _| Ok(()),
    )
    .await;
    cli.step(&["load-balancer", "add-target", "lb-1", "--server", "web-1", "--use-private-ip"], |_, _| Ok(())).await;
    cli.step(&["load-balancer", "add-target", "lb-1", "--label-selector", "role=db"], |_, _| Ok(())).await;
    cli.step(&["load-balancer", "add-target", "lb-1", "--ip", "203.0.113.9"], |_, _| Ok(())).await;
    cli.step(
        &[
            "load-balancer",
            "update-service",
            "lb-1",
            "--listen-port",
            "80",
            "--health-check-protocol",
            "http",
            "--health-check-port",
            "30080",
            "--health-check-http-path",
            "/healthz",
            "--health-check-http-status-codes",
            "2??,3??",
            "--health-check-interval",
            "10s",
            "--health-check-timeout",
            "5s",
            "--health-check-retries",
            "2",
            "--proxy-protocol",
        ],
        |_, _| Ok(()),
    )
    .await;
    cli.step(&["load-balancer", "change-algorithm", "lb-1", "--algorithm-type", "least_connections"], |_, _| Ok(()))
        .await;
    cli.json(&["load-balancer", "describe", "lb-1"], |doc, a| {
        a.eq("type", s(&doc["load_balancer_type"]["name"]), "lb11")?;
        a.eq("algorithm", s(&doc["algorithm"]["type"]), "least_connections")?;
        a.eq("label", s(&doc["labels"]["env"]), "test")?;
        a.eq("private IP", s(&doc["private_net"][0]["ip"]), "10.0.0.10")?;
        let services = doc["services"].as_array().cloned().unwrap_or_default();
        a.eq("services", services.len(), 2)?;
        let tcp = services.iter().find(|x| x["listen_port"] == 80).cloned().unwrap_or_default();
        a.eq("port 80 protocol", s(&tcp["protocol"]), "tcp")?;
        a.eq("port 80 proxyprotocol", tcp["proxyprotocol"].as_bool(), Some(true))?;
        a.eq("health check protocol", s(&tcp["health_check"]["protocol"]), "http")?;
        a.eq("health check interval", tcp["health_check"]["interval"].as_u64(), Some(10))?;
        a.eq("health check retries", tcp["health_check"]["retries"].as_u64(), Some(2))?;
        a.eq("health check path", s(&tcp["health_check"]["http"]["path"]), "/healthz")?;
        a.eq(
            "health check status codes",
            tcp["health_check"]["http"]["status_codes"].clone(),
            serde_json::json!(["2??", "3??"]),
        )?;
        let https = services.iter().find(|x| x["listen_port"] == 443).cloned().unwrap_or_default();
        a.eq("port 443 protocol", s(&https["protocol"]), "https")?;
        a.eq("sticky sessions", https["http"]["sticky_sessions"].as_bool(), Some(true))?;
        a.eq("cookie lifetime", https["http"]["cookie_lifetime"].as_u64(), Some(600))?;
        a.eq("idle timeout", https["http"]["timeout_idle"].as_u64(), Some(60))?;
        a.eq("certificates", https["http"]["certificates"].as_array().map(Vec::len), Some(1))?;
        let targets = doc["targets"].as_array().cloned().unwrap_or_default();
        a.eq("targets", targets.len(), 3)?;
        let server = targets.iter().find(|t| t["type"] == "server").cloned().unwrap_or_default();
        a.eq("server target uses the private IP", server["use_private_ip"].as_bool(), Some(true))?;
        let selector = targets.iter().find(|t| t["type"] == "label_selector").cloned().unwrap_or_default();
        a.eq("label selector", s(&selector["label_selector"]["selector"]), "role=db")?;
        a.eq("label selector resolves to db-1", selector["targets"].as_array().map(Vec::len), Some(1))?;
        a.that("an IPv4", s(&doc["public_net"]["ipv4"]["ip"]).parse::<std::net::Ipv4Addr>().is_ok())
    })
    .await;
    cli.step(&["load-balancer", "describe", "lb-1"], |o, a| {
        a.contains("description", &o.stdout, "least_connections")?;
        a.contains("description", &o.stdout, "Health Check")?;
        a.contains("description", &o.stdout, "role=db")
    })
    .await;
    cli.step(&["load-balancer", "list", "-o", "columns=name,type,location,health"], |o, a| {
        let rows = rows(&o.stdout);
        a.eq("one row", rows.len(), 1)?;
        a.eq("row", rows[0][..3].to_vec(), vec!["lb-1".to_owned(), "lb11".to_owned(), "fsn1".to_owned()])
    })
    .await;
    cli.step(&["load-balancer", "disable-public-interface", "lb-1"], |_, _| Ok(())).await;
    cli.json(&["load-balancer", "describe", "lb-1"], |doc, a| {
        a.eq("public interface", doc["public_net"]["enabled"].as_bool(), Some(false))
    })
    .await;
    cli.step(&["load-balancer", "enable-public-interface", "lb-1"], |_, _| Ok(())).await;
    cli.step(&["load-balancer", "change-type", "lb-1", "lb21"], |_, _| Ok(())).await;
    cli.step(&["load-balancer", "remove-target", "lb-1", "--server", "web-1"], |_, _| Ok(())).await;
    cli.step(&["load-balancer", "delete-service", "lb-1", "--listen-port", "443"], |_, _| Ok(())).await;
    cli.json(&["load-balancer", "describe", "lb-1"], |doc, a| {
        a.eq("type after change", s(&doc["load_balancer_type"]["name"]), "lb21")?;
        a.eq("public interface", doc["public_net"]["enabled"].as_bool(), Some(true))?;
        a.eq("services after delete", doc["services"].as_array().map(Vec::len), Some(1))?;
        a.eq("targets after remove", doc["targets"].as_array().map(Vec::len), Some(2))
    })
    .await;
    cli.step(&["load-balancer", "detach-from-network", "lb-1", "--network", "k8s"], |_, _| Ok(())).await;
    cli.step(&["load-balancer", "delete", "lb-1"], |o, a| a.contains("delete output", &o.stdout, "deleted")).await;
    cli.step(&["certificate", "delete", "uploaded"], |o, a| a.contains("delete output", &o.stdout, "deleted")).await;
}

async fn primary_ips_and_cleanup(cli: &mut Cli) {
    cli.json(&["primary-ip", "list"], |doc, a| {
        let ips = doc.as_array().cloned().unwrap_or_default();
        a.eq("two Primary IPs per server", ips.len(), 6)?;
        a.that(
            "every one assigned to a server",
            ips.iter().all(|ip| ip["assignee_type"] == "server" && ip["assignee_id"].is_u64()),
        )
    })
    .await;
    cli.step(&["server", "detach-from-network", "web-2", "--network", "k8s"], |_, _| Ok(())).await;
    for name in ["web-1", "web-2", "db-1"] {
        cli.step(&["server", "delete", name], |o, a| a.contains("delete output", &o.stdout, "deleted")).await;
    }
    cli.json(&["server", "list"], |doc, a| a.eq("servers left", doc.as_array().map(Vec::len), Some(0))).await;
    cli.step(&["network", "delete", "k8s"], |o, a| a.contains("delete output", &o.stdout, "deleted")).await;
    cli.step(&["certificate", "delete", "managed"], |o, a| a.contains("delete output", &o.stdout, "deleted")).await;
}
