//! Scenario, part 1: the context, the catalogue, servers, networks, certificates.

use super::harness::{Asserts, Cli, Output, TOKEN, fixtures, names, rows, s};

/// A context with the fake's token and endpoint, as `hcloud context create` writes it.
pub async fn context(cli: &mut Cli, endpoint: &str) {
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

pub async fn catalog(cli: &mut Cli) {
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

pub async fn servers(cli: &mut Cli) {
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

pub async fn networks(cli: &mut Cli) {
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

pub async fn certificates(cli: &mut Cli) {
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
