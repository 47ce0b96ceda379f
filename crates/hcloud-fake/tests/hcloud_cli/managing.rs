//! Scenario, part 3: what a person does besides creating things: images, renames, labels,
//! protection, reboots, subnets and IP ranges, Primary IPs of their own.

use super::harness::{Cli, rows, s};

pub async fn images(cli: &mut Cli) {
    cli.json(&["image", "describe", "ubuntu-24.04"], |doc, a| {
        a.eq("name", s(&doc["name"]), "ubuntu-24.04")?;
        a.eq("type", s(&doc["type"]), "system")?;
        a.eq("architecture (x86 unless asked)", s(&doc["architecture"]), "x86")?;
        a.eq("os flavor", s(&doc["os_flavor"]), "ubuntu")?;
        a.that("an id", doc["id"].as_u64().is_some())
    })
    .await;
    cli.json(&["image", "describe", "ubuntu-24.04", "--architecture", "arm"], |doc, a| {
        a.eq("architecture", s(&doc["architecture"]), "arm")
    })
    .await;
    cli.step(
        &["image", "list", "--architecture", "arm", "-o", "columns=name,architecture", "-o", "noheader"],
        |o, a| {
            let rows: Vec<Vec<String>> =
                o.stdout.lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).collect();
            a.that("only arm images", !rows.is_empty() && rows.iter().all(|r| r.get(1).is_some_and(|x| x == "arm")))?;
            // The CLI lists deprecated images too (it sends include_deprecated=true).
            a.that("the deprecated ubuntu-20.04 is listed", rows.iter().any(|r| r[0] == "ubuntu-20.04"))
        },
    )
    .await;
    cli.step(&["image", "describe", "ubuntu-20.04"], |o, a| {
        a.contains("description", &o.stdout, "Deprecated:")?;
        a.contains("description", &o.stdout, "2025-06-01")
    })
    .await;
}

/// The plain descriptions of the types read `GET /pricing` for the prices per location.
pub async fn prices(cli: &mut Cli) {
    cli.step(&["server-type", "describe", "cx23"], |o, a| {
        a.contains("description", &o.stdout, "Pricing:")?;
        a.contains("description", &o.stdout, "Location:              hel1")?;
        a.contains("description", &o.stdout, "Included Traffic:    20 TiB")
    })
    .await;
    cli.step(&["load-balancer-type", "describe", "lb11"], |o, a| {
        a.contains("description", &o.stdout, "Location:            sin")?;
        a.that("no error", o.stderr.trim().is_empty())
    })
    .await;
}

pub async fn manage_servers(cli: &mut Cli) {
    cli.step(&["server", "update", "db-1", "--name", "db-01"], |o, a| {
        a.contains("update output", &o.stdout, "updated")
    })
    .await;
    cli.json(&["server", "describe", "db-01"], |doc, a| {
        a.eq("new name", s(&doc["name"]), "db-01")?;
        a.eq("labels kept", s(&doc["labels"]["role"]), "db")
    })
    .await;
    cli.step(&["server", "update", "db-01", "--name", "db-1"], |_, _| Ok(())).await;
    cli.fails(&["server", "update", "db-1", "--name", "web-1"], |o, a| {
        a.contains("error", &o.stderr, "uniqueness_error")
    })
    .await;
    cli.step(&["server", "enable-protection", "db-1", "delete", "rebuild"], |o, a| {
        a.contains("output", &o.stdout, "Resource protection enabled")
    })
    .await;
    cli.json(&["server", "describe", "db-1"], |doc, a| {
        a.eq("delete protection", doc["protection"]["delete"].as_bool(), Some(true))?;
        a.eq("rebuild protection", doc["protection"]["rebuild"].as_bool(), Some(true))
    })
    .await;
    cli.fails(&["server", "delete", "db-1"], |o, a| a.contains("error", &o.stderr, "protected")).await;
    cli.step(&["server", "disable-protection", "db-1", "delete", "rebuild"], |_, _| Ok(())).await;
    cli.json(&["server", "describe", "db-1"], |doc, a| {
        a.eq("delete protection", doc["protection"]["delete"].as_bool(), Some(false))
    })
    .await;
    cli.step(&["server", "set-rdns", "web-2", "--hostname", "web-2.example.com"], |o, a| {
        a.contains("output", &o.stdout, "Reverse DNS of Server web-2 changed")
    })
    .await;
    cli.json(&["server", "describe", "web-2"], |doc, a| {
        a.eq("IPv4 reverse DNS", s(&doc["public_net"]["ipv4"]["dns_ptr"]), "web-2.example.com")
    })
    .await;
    cli.fails(&["server", "set-rdns", "web-2", "--ip", "198.51.100.7", "--hostname", "x.example.com"], |o, a| {
        a.contains("error", &o.stderr, "invalid_input")
    })
    .await;
    cli.step(&["server", "reboot", "web-2"], |o, a| a.contains("reboot output", &o.stdout, "rebooted")).await;
    cli.step(&["server", "reset", "web-2"], |o, a| a.contains("reset output", &o.stdout, "reset")).await;
    cli.json(&["server", "describe", "web-2"], |doc, a| a.eq("status", s(&doc["status"]), "running")).await;
    cli.step(&["server", "list", "-l", "role=web", "-o", "columns=name,labels", "-o", "noheader"], |o, a| {
        a.eq("two web servers", o.stdout.lines().count(), 2)?;
        a.contains("labels column", &o.stdout, "role=web")
    })
    .await;
}

pub async fn manage_networks(cli: &mut Cli) {
    cli.step(&["network", "add-label", "k8s", "team=infra"], |_, _| Ok(())).await;
    cli.step(&["network", "expose-routes-to-vswitch", "k8s"], |_, _| Ok(())).await;
    cli.json(&["network", "describe", "k8s"], |doc, a| {
        a.eq("new label", s(&doc["labels"]["team"]), "infra")?;
        a.eq("old label", s(&doc["labels"]["env"]), "test")?;
        a.eq("routes exposed", doc["expose_routes_to_vswitch"].as_bool(), Some(true))
    })
    .await;
    cli.step(&["network", "expose-routes-to-vswitch", "k8s", "--disable"], |_, _| Ok(())).await;
    cli.step(&["network", "remove-label", "k8s", "team"], |_, _| Ok(())).await;
    cli.json(&["network", "describe", "k8s"], |doc, a| {
        a.that("label gone", doc["labels"].get("team").is_none())?;
        a.eq("routes no longer exposed", doc["expose_routes_to_vswitch"].as_bool(), Some(false))
    })
    .await;

    // A scratch network grows, gets subnets (one without a range: the first free /24),
    // loses one, is protected, renamed and deleted.
    cli.step(&["network", "create", "--name", "scratch", "--ip-range", "192.168.0.0/24"], |_, _| Ok(())).await;
    cli.step(&["network", "change-ip-range", "scratch", "--ip-range", "192.168.0.0/16"], |_, _| Ok(())).await;
    cli.fails(&["network", "change-ip-range", "scratch", "--ip-range", "192.168.0.0/20"], |o, a| {
        a.contains("error", &o.stderr, "invalid_input")
    })
    .await;
    cli.step(
        &[
            "network",
            "add-subnet",
            "scratch",
            "--type",
            "cloud",
            "--network-zone",
            "us-east",
            "--ip-range",
            "192.168.7.0/24",
        ],
        |_, _| Ok(()),
    )
    .await;
    cli.step(&["network", "add-subnet", "scratch", "--type", "cloud", "--network-zone", "eu-central"], |_, _| Ok(()))
        .await;
    cli.fails(
        &[
            "network",
            "add-subnet",
            "scratch",
            "--type",
            "cloud",
            "--network-zone",
            "eu-central",
            "--ip-range",
            "10.1.0.0/24",
        ],
        |o, a| a.contains("error", &o.stderr, "invalid_input"),
    )
    .await;
    cli.json(&["network", "describe", "scratch"], |doc, a| {
        a.eq("range", s(&doc["ip_range"]), "192.168.0.0/16")?;
        let ranges: Vec<&str> = doc["subnets"].as_array().into_iter().flatten().map(|x| s(&x["ip_range"])).collect();
        a.eq("subnets", ranges, vec!["192.168.7.0/24", "192.168.0.0/24"])?;
        a.eq("gateway", s(&doc["subnets"][1]["gateway"]), "192.168.0.1")
    })
    .await;
    cli.step(&["network", "remove-subnet", "scratch", "--ip-range", "192.168.7.0/24"], |_, _| Ok(())).await;
    cli.step(&["network", "enable-protection", "scratch", "delete"], |_, _| Ok(())).await;
    cli.fails(&["network", "delete", "scratch"], |o, a| a.contains("error", &o.stderr, "protected")).await;
    cli.step(&["network", "disable-protection", "scratch", "delete"], |_, _| Ok(())).await;
    cli.step(&["network", "update", "scratch", "--name", "scratch-2"], |_, _| Ok(())).await;
    // `network list` takes no `--sort` (the CLI ignores it for networks): id order.
    cli.step(&["network", "list", "-o", "columns=name,ip_range", "-o", "noheader"], |o, a| {
        let rows: Vec<Vec<&str>> = o.stdout.lines().map(|l| l.split_whitespace().collect()).collect();
        a.eq("networks", rows, vec![vec!["k8s", "10.0.0.0/8"], vec!["scratch-2", "192.168.0.0/16"]])
    })
    .await;
    cli.json(&["network", "describe", "scratch-2"], |doc, a| {
        a.eq("one subnet left", doc["subnets"].as_array().map(Vec::len), Some(1))?;
        a.eq("protection", doc["protection"]["delete"].as_bool(), Some(false))
    })
    .await;
    cli.step(&["network", "delete", "scratch-2"], |o, a| a.contains("delete output", &o.stdout, "deleted")).await;
}

pub async fn manage_certificates(cli: &mut Cli) {
    cli.step(&["certificate", "add-label", "uploaded", "team=web"], |_, _| Ok(())).await;
    cli.step(&["certificate", "update", "managed", "--name", "managed-2"], |_, _| Ok(())).await;
    cli.step(&["certificate", "list", "-l", "team=web", "-o", "columns=name,labels", "-o", "noheader"], |o, a| {
        a.eq("rows", rows(&format!("\n{}", o.stdout)), vec![vec!["uploaded".to_owned(), "team=web".to_owned()]])
    })
    .await;
    cli.json(&["certificate", "describe", "managed-2"], |doc, a| a.eq("renamed", s(&doc["name"]), "managed-2")).await;
    cli.step(&["certificate", "update", "managed-2", "--name", "managed"], |_, _| Ok(())).await;
}

pub async fn manage_primary_ips(cli: &mut Cli) {
    cli.step(
        &["primary-ip", "create", "--type", "ipv4", "--name", "spare", "--location", "fsn1", "--label", "use=spare"],
        |o, a| a.contains("create output", &o.stdout, "created"),
    )
    .await;
    cli.json(&["primary-ip", "describe", "spare"], |doc, a| {
        a.eq("type", s(&doc["type"]), "ipv4")?;
        a.that("unassigned", doc["assignee_id"].is_null())?;
        a.eq("location", s(&doc["location"]["name"]), "fsn1")?;
        a.eq("label", s(&doc["labels"]["use"]), "spare")
    })
    .await;
    cli.step(&["primary-ip", "add-label", "spare", "team=infra"], |_, _| Ok(())).await;
    cli.step(&["primary-ip", "update", "spare", "--name", "spare-2", "--auto-delete"], |_, _| Ok(())).await;
    cli.json(&["primary-ip", "describe", "spare-2"], |doc, a| {
        a.eq("label", s(&doc["labels"]["team"]), "infra")?;
        a.eq("auto delete", doc["auto_delete"].as_bool(), Some(true))
    })
    .await;
    cli.step(
        &["primary-ip", "list", "-l", "use=spare", "-o", "columns=name,type,assignee", "-o", "noheader"],
        |o, a| a.eq("the spare", o.stdout.split_whitespace().collect::<Vec<_>>(), vec!["spare-2", "ipv4", "-"]),
    )
    .await;
    cli.step(&["primary-ip", "delete", "spare-2"], |o, a| a.contains("delete output", &o.stdout, "deleted")).await;
}
