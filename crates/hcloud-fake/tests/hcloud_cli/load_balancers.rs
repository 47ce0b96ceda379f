//! Scenario, part 2: Load Balancers, Primary IPs and the clean-up.

use super::harness::{Cli, rows, s};

pub async fn load_balancers(cli: &mut Cli) {
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
    // The public interface can only be disabled when no target uses a public IP: the
    // OpenAPI description of `disable_public_interface` lists `targets_without_use_private_ip`
    // ("The Load Balancer has targets that use the public IP instead of the private IP"), and
    // the label selector target `role=db` above was added without `--use-private-ip`. So the
    // first attempt must fail; with that target re-added on the private network it works.
    cli.fails(&["load-balancer", "disable-public-interface", "lb-1"], |o, a| {
        a.contains("error", &o.stderr, "targets_without_use_private_ip")
    })
    .await;
    cli.step(&["load-balancer", "remove-target", "lb-1", "--label-selector", "role=db"], |_, _| Ok(())).await;
    cli.step(
        &["load-balancer", "add-target", "lb-1", "--label-selector", "role=db", "--use-private-ip"],
        |_, _| Ok(()),
    )
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
    // `delete-service` prints as soon as the API accepted it and does not wait for the action
    // (its source: no WaitForActions), so the service goes when the action finishes, as with
    // the real API. Wait for the action to finish (at most 10 s), then assert.
    cli.poll_json(&["load-balancer", "describe", "lb-1"], |doc| {
        doc["services"].as_array().is_some_and(|s| s.len() == 1)
    })
    .await;
    cli.json(&["load-balancer", "describe", "lb-1"], |doc, a| {
        a.eq("type after change", s(&doc["load_balancer_type"]["name"]), "lb21")?;
        a.eq("public interface", doc["public_net"]["enabled"].as_bool(), Some(true))?;
        a.eq("services after delete", doc["services"].as_array().map(Vec::len), Some(1))?;
        a.eq("targets after remove", doc["targets"].as_array().map(Vec::len), Some(2))
    })
    .await;
    cli.step(&["load-balancer", "add-label", "lb-1", "tier=edge"], |_, _| Ok(())).await;
    cli.step(&["load-balancer", "update", "lb-1", "--name", "lb-one"], |_, _| Ok(())).await;
    cli.json(&["load-balancer", "describe", "lb-one"], |doc, a| {
        a.eq("renamed", s(&doc["name"]), "lb-one")?;
        a.eq("new label", s(&doc["labels"]["tier"]), "edge")?;
        a.eq("old label", s(&doc["labels"]["env"]), "test")
    })
    .await;
    cli.step(&["load-balancer", "update", "lb-one", "--name", "lb-1"], |_, _| Ok(())).await;
    cli.step(&["load-balancer", "enable-protection", "lb-1", "delete"], |_, _| Ok(())).await;
    cli.fails(&["load-balancer", "delete", "lb-1"], |o, a| a.contains("error", &o.stderr, "protected")).await;
    cli.step(&["load-balancer", "disable-protection", "lb-1", "delete"], |_, _| Ok(())).await;
    cli.step(&["load-balancer", "detach-from-network", "lb-1", "--network", "k8s"], |_, _| Ok(())).await;
    cli.step(&["load-balancer", "delete", "lb-1"], |o, a| a.contains("delete output", &o.stdout, "deleted")).await;
    cli.step(&["certificate", "delete", "uploaded"], |o, a| a.contains("delete output", &o.stdout, "deleted")).await;
}

pub async fn primary_ips_and_cleanup(cli: &mut Cli) {
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
