//! HcloudLoadBalancers against the Hetzner fake: what each Service lifecycle step sends (counted
//! per endpoint in the fake's request log), and that the fake ends up as the Service asks.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::lb_support;

use cloud_provider::IpMode;
use cloud_provider::LoadBalancer as _;
use hcloud_fake::control::{SeedCertificate, SeedLoadBalancer, SeedServer};
use hcloud_provider::load_balancers::annotations as a;
use lb_support::*;

#[tokio::test]
async fn a_new_service_costs_one_create_and_an_unchanged_one_nothing() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 3, None);
    s.h.reset_requests();
    let svc = service(&[(a::TYPE, "lb11")], &[(80, "TCP", 30080), (443, "TCP", 30443)]);

    let status = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    assert_eq!(
        sent(&s.h),
        vec!["GET /v1/load_balancers", "GET /v1/load_balancer_types", "POST /v1/load_balancers"],
        "one list of Load Balancers, one list of types, one create with everything in it"
    );
    let lb = only_lb(&s.h);
    assert_eq!(lb.labels.get("hcloud-ccm/service-uid").map(String::as_str), Some(UID));
    assert_eq!(lb.name, "a5b1c3d2e7a4f4e0b9c1d2e3f4a5b6c7");
    assert_eq!(lb.location.name, "fsn1");
    let ports: Vec<(u16, u16, u16)> =
        lb.services.iter().map(|s| (s.listen_port, s.destination_port, s.health_check.port)).collect();
    assert_eq!(ports, vec![(80, 30080, 30080), (443, 30443, 30443)]);
    assert_eq!(lb.targets.len(), 3);
    let ips: Vec<(String, Option<IpMode>)> =
        status.ingress.iter().map(|i| (i.ip.clone().unwrap_or_default(), i.ip_mode)).collect();
    assert_eq!(
        ips,
        vec![
            (lb.public_net.ipv4.ip.clone().unwrap(), Some(IpMode::Vip)),
            (lb.public_net.ipv6.ip.clone().unwrap(), Some(IpMode::Vip))
        ]
    );

    settle(&s).await;
    s.h.reset_requests();
    let again = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure again");
    assert_eq!(again, status);
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(s.h.request_counts().total, 0, "nothing changed: no request at all");
    assert!(s.events.reasons().is_empty(), "{:?}", s.events.reasons());
}

#[tokio::test]
async fn a_node_added_costs_one_add_target() {
    let s = setup().await;
    let mut nodes = seed_nodes(&s.h, 2, None);
    let svc = service(&[(a::TYPE, "lb11")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;
    nodes.push(node("node-new", s.h.seed_server(&SeedServer::new("node-new")).expect("server")));
    s.h.reset_requests();

    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(sent(&s.h), vec!["POST /v1/load_balancers/{id}/actions/add_target"]);
    settle(&s).await;
    assert!(s.h.request_count("GET /v1/actions") >= 1, "the add_target action was confirmed");
    assert_eq!(only_lb(&s.h).targets.len(), 3);

    // A node removed: one remove_target.
    nodes.remove(0);
    s.h.reset_requests();
    s.lbs.update_load_balancer("k", &svc, &nodes).await.expect("update");
    assert_eq!(sent(&s.h), vec!["POST /v1/load_balancers/{id}/actions/remove_target"]);
    settle(&s).await;
    assert_eq!(only_lb(&s.h).targets.len(), 2);
}

#[tokio::test]
async fn ports_follow_the_service() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(80, "TCP", 30080), (443, "TCP", 30443)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    settle(&s).await;

    // NodePort of 80 changed, 443 removed, 8080 added.
    let changed = service(&[], &[(80, "TCP", 31080), (8080, "TCP", 30880)]);
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &changed, &nodes).await.expect("ensure");
    assert_eq!(
        mutating(&s.h),
        vec![
            "POST /v1/load_balancers/{id}/actions/delete_service",
            "POST /v1/load_balancers/{id}/actions/update_service",
            "POST /v1/load_balancers/{id}/actions/add_service"
        ]
    );
    settle(&s).await;
    let lb = only_lb(&s.h);
    let ports: Vec<(u16, u16, u16)> =
        lb.services.iter().map(|s| (s.listen_port, s.destination_port, s.health_check.port)).collect();
    assert_eq!(ports, vec![(80, 31080, 31080), (8080, 30880, 30880)]);
    // At each sync, like the official CCM: an existing Load Balancer relies on the default too.
    assert_eq!(s.events.with_reason("LoadBalancerTypeUnconfigured").len(), 2, "one per sync");
}

#[tokio::test]
async fn an_existing_load_balancer_is_adopted_by_name() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 2, None);
    let id = s.h.seed_load_balancer(&SeedLoadBalancer::new("shop-web")).expect("lb");
    let svc = service(&[(a::NAME, "shop-web")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    assert_eq!(s.h.request_count("POST /v1/load_balancers"), 0, "adopted, not created");
    settle(&s).await;
    let lb = only_lb(&s.h);
    assert_eq!(lb.id, id);
    assert_eq!(lb.labels.get("hcloud-ccm/service-uid").map(String::as_str), Some(UID));
    assert_eq!((lb.services.len(), lb.targets.len()), (1, 2));
}

#[tokio::test]
async fn udp_ports_are_reported_and_tcp_ports_served() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 1, None);
    let svc = service(&[], &[(53, "UDP", 30053), (80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    let ev = s.events.with_reason("UnsupportedProtocolConfigured");
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].object.kind, ev[0].object.name.as_str()), ("Service", "web"));
    assert!(ev[0].message.contains("53/UDP"), "{}", ev[0].message);
    assert_eq!(only_lb(&s.h).services.iter().map(|s| s.listen_port).collect::<Vec<_>>(), vec![80]);
}

#[tokio::test]
async fn max_targets_gives_events_instead_of_a_failure() {
    let s = setup().await;
    let nodes = seed_nodes(&s.h, 27, None);
    let svc = service(&[(a::TYPE, "lb11")], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    assert_eq!(only_lb(&s.h).targets.len(), 25, "lb11 takes 25");
    let full = s.events.with_reason("MaxTargetsReached");
    assert_eq!(full.len(), 2);
    assert!(full.iter().all(|e| e.object.kind == "Node"));
    assert!(full[0].message.contains("max number of targets has been reached"), "{}", full[0].message);
    // Upgrading the type adds the rest.
    settle(&s).await;
    let bigger = service(&[(a::TYPE, "lb21")], &[(80, "TCP", 30080)]);
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &bigger, &nodes).await.expect("ensure");
    assert_eq!(
        mutating(&s.h),
        vec![
            "POST /v1/load_balancers/{id}/actions/change_type",
            "POST /v1/load_balancers/{id}/actions/add_target",
            "POST /v1/load_balancers/{id}/actions/add_target"
        ]
    );
    settle(&s).await;
    assert_eq!(only_lb(&s.h).targets.len(), 27);
}

#[tokio::test]
async fn rename_through_the_annotation() {
    let s = setup().await;
    let svc = service(&[], &[(80, "TCP", 30080)]);
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    settle(&s).await;
    s.h.reset_requests();
    s.lbs
        .ensure_load_balancer("k", &service(&[(a::NAME, "renamed")], &[(80, "TCP", 30080)]), &[])
        .await
        .expect("ensure");
    assert_eq!(mutating(&s.h), vec!["PUT /v1/load_balancers/{id}"]);
    assert_eq!(only_lb(&s.h).name, "renamed");
}

#[tokio::test]
async fn https_with_an_uploaded_certificate_by_name() {
    let s = setup().await;
    let cert = s.h.seed_certificate(&SeedCertificate::uploaded("shop-tls", &["shop.example.com"])).expect("cert");
    let svc = service(
        &[(a::PROTOCOL, "https"), (a::HTTP_CERTIFICATES, "shop-tls"), (a::HTTP_REDIRECT_HTTP, "true")],
        &[(443, "TCP", 30443)],
    );
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    let lb = only_lb(&s.h);
    let http = lb.services[0].http.clone().expect("http options");
    assert_eq!((lb.services[0].protocol.as_str(), http.certificates, http.redirect_http), ("https", vec![cert], true));
    settle(&s).await;
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("again");
    assert!(mutating(&s.h).is_empty(), "{:?}", sent(&s.h));

    let missing = service(&[(a::PROTOCOL, "https"), (a::HTTP_CERTIFICATES, "nope")], &[(443, "TCP", 30443)]);
    let err = s.lbs.ensure_load_balancer("k", &missing, &[]).await.expect_err("unknown certificate");
    assert!(
        err.to_string().contains("annotation load-balancer.hetzner.cloud/http-certificates: \"nope\" is invalid"),
        "{err}"
    );
    // A per-port value names the annotation the user wrote (issue 27 item 11).
    let missing = service(
        &[
            ("load-balancer.hetzner.cloud/port.443.protocol", "https"),
            ("load-balancer.hetzner.cloud/port.443.http-certificates", "nope"),
        ],
        &[(80, "TCP", 30080), (443, "TCP", 30443)],
    );
    let err = s.lbs.ensure_load_balancer("k", &missing, &[]).await.expect_err("unknown certificate");
    assert_eq!(err.reason(), "InvalidLoadBalancerConfiguration");
    assert!(
        err.to_string().contains(
            "annotation load-balancer.hetzner.cloud/port.443.http-certificates: \"nope\" is invalid; no certificate \
             with this name exists in the project"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_managed_certificate_is_created_once_with_the_service_label() {
    let s = setup().await;
    let svc = service(
        &[
            (a::PROTOCOL, "https"),
            (a::CERTIFICATE_TYPE, "managed"),
            (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "shop.example.com"),
            (a::HTTP_MANAGED_CERTIFICATE_ACME_STAGING, "true"),
        ],
        &[(443, "TCP", 30443)],
    );
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("ensure");
    let certs = s.h.snapshot().certificates;
    assert_eq!(certs.len(), 1);
    let cert = &certs[0];
    assert_eq!(cert.name, format!("ccm-managed-certificate-{UID}"));
    assert_eq!(cert.labels.get("hcloud-ccm/service-uid").map(String::as_str), Some(UID));
    assert_eq!(cert.labels.get("HC-Use-Staging-CA").map(String::as_str), Some("true"));
    assert_eq!(only_lb(&s.h).services[0].http.as_ref().map(|h| h.certificates.clone()), Some(vec![cert.id]));
    settle(&s).await;
    s.lbs.ensure_load_balancer("k", &svc, &[]).await.expect("again");
    assert_eq!(s.h.request_count("POST /v1/certificates"), 1, "created once");
}

/// Issue 27 item 4: a managed certificate name taken by a certificate not labelled for this
/// Service is refused with `ManagedCertificateConflict`, never renamed to `<name>-2` (which is
/// kept for the Service's own certificate when its domains change); nothing is sent.
#[tokio::test]
async fn a_managed_certificate_name_taken_by_another_certificate_is_refused() {
    let s = setup().await;
    let name = format!("ccm-managed-certificate-{UID}");
    let foreign = s.h.seed_certificate(&SeedCertificate::uploaded(&name, &["other.example.com"])).expect("cert");
    let managed = |extra: &[(&'static str, &'static str)]| {
        let mut ann = vec![
            (a::PROTOCOL, "https"),
            (a::CERTIFICATE_TYPE, "managed"),
            (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, "shop.example.com"),
        ];
        ann.extend_from_slice(extra);
        service(&ann, &[(443, "TCP", 30443)])
    };
    s.h.reset_requests();
    let err = s.lbs.ensure_load_balancer("k", &managed(&[]), &[]).await.expect_err("name taken");
    assert_eq!(err.reason(), "ManagedCertificateConflict", "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "ManagedCertificateConflict: Service shop/web: a certificate named {name} exists but does not carry the \
             label hcloud-ccm/service-uid={UID} of this Service; set load-balancer.hetzner.cloud/\
             http-managed-certificate-name to another name or delete that certificate"
        )
    );
    assert_eq!(mutating(&s.h), Vec::<String>::new(), "nothing created, no Load Balancer either");
    let names: Vec<(u64, String)> = s.h.snapshot().certificates.into_iter().map(|c| (c.id, c.name)).collect();
    assert_eq!(names, vec![(foreign, name.clone())]);

    // Another name: created under it.
    s.lbs
        .ensure_load_balancer("k", &managed(&[(a::HTTP_MANAGED_CERTIFICATE_NAME, "shop-cert")]), &[])
        .await
        .expect("ensure");
    let ours: Vec<String> =
        s.h.snapshot().certificates.into_iter().filter(|c| c.id != foreign).map(|c| c.name).collect();
    assert_eq!(ours, vec!["shop-cert".to_owned()]);
}

/// New `http-managed-certificate-domains`: one list and one create; the port keeps the issued
/// certificate until the new one is issued, then one `update_service` and the old one's
/// delete (again at a later sync while the update still runs); a failed issuance is reported
/// and keeps the issued one. Unchanged syncs send nothing.
#[tokio::test]
async fn a_managed_certificate_domain_change_switches_once_issued() {
    let s = setup().await;
    let svc = |domains: &'static str| {
        service(
            &[(a::PROTOCOL, "https"), (a::CERTIFICATE_TYPE, "managed"), (a::HTTP_MANAGED_CERTIFICATE_DOMAINS, domains)],
            &[(443, "TCP", 30443)],
        )
    };
    let port_certs = |s: &Setup| only_lb(&s.h).services[0].http.as_ref().map(|h| h.certificates.clone()).unwrap();
    s.lbs.ensure_load_balancer("k", &svc("a.example.com"), &[]).await.expect("ensure");
    settle(&s).await;
    let old = port_certs(&s)[0];

    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc("b.example.com"), &[]).await.expect("new domains");
    assert_eq!(sent(&s.h), vec!["GET /v1/certificates", "POST /v1/certificates"]);
    assert_eq!(port_certs(&s), vec![old], "the issued certificate stays while the new one is issued");
    assert_eq!(s.events.with_reason("ManagedCertificateIssuing").len(), 1);
    let new = s.h.snapshot().certificates.iter().find(|c| c.domain_names == ["b.example.com"]).map(|c| c.id).unwrap();

    s.h.finish_all_actions();
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc("b.example.com"), &[]).await.expect("issued");
    assert_eq!(
        sent(&s.h),
        vec![
            "GET /v1/certificates",
            "POST /v1/load_balancers/{id}/actions/update_service",
            "DELETE /v1/certificates/{id}"
        ]
    );
    settle(&s).await;
    assert_eq!(port_certs(&s), vec![new]);
    if s.h.snapshot().certificates.iter().any(|c| c.id == old) {
        // The delete met the running update_service: a later sync deletes it.
        s.h.reset_requests();
        s.lbs.ensure_load_balancer("k", &svc("b.example.com"), &[]).await.expect("retire");
        assert_eq!(sent(&s.h), vec!["DELETE /v1/certificates/{id}"]);
    }
    assert_eq!(s.h.snapshot().certificates.iter().map(|c| c.id).collect::<Vec<_>>(), vec![new]);
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc("b.example.com"), &[]).await.expect("unchanged");
    assert_eq!(s.h.request_counts().total, 0, "nothing changed: no request at all");

    s.h.fail_next_actions(hcloud_fake::control::ActionFailure {
        count: 1,
        command: Some("create_certificate".into()),
        code: "dns_error".into(),
        message: "no DNS record for c.example.com".into(),
    });
    s.lbs.ensure_load_balancer("k", &svc("c.example.com"), &[]).await.expect("bad domain");
    s.h.finish_all_actions();
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc("c.example.com"), &[]).await.expect("failed issuance");
    assert_eq!(sent(&s.h), vec!["GET /v1/certificates"]);
    assert_eq!(port_certs(&s), vec![new], "the issued certificate stays");
    let failed = s.events.with_reason("ManagedCertificateIssuanceFailed");
    assert_eq!(
        failed.last().map(|e| e.message.clone()).unwrap(),
        format!(
            "managed certificate ccm-managed-certificate-{UID} for c.example.com could not be issued: dns_error: no \
             DNS record for c.example.com; the Load Balancer keeps certificate ccm-managed-certificate-{UID}-2 \
             (b.example.com); set load-balancer.hetzner.cloud/http-managed-certificate-domains to domains whose DNS \
             points to the Load Balancer, or delete certificate ccm-managed-certificate-{UID} to have it issued again"
        )
    );
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &svc("c.example.com"), &[]).await.expect("still failed");
    assert_eq!(s.h.request_counts().total, 0, "a failed issuance costs no request per sync");
}

#[tokio::test]
async fn private_network_with_private_ip_targets_and_private_ingress() {
    let (s, net) = setup_net().await;
    let nodes = seed_nodes(&s.h, 2, Some(net));
    let svc = service(
        &[(a::LOCATION, "nbg1"), (a::USE_PRIVATE_IP, "true"), (a::PRIVATE_SUBNET_IP_RANGE, "10.0.0.0/24")],
        &[(80, "TCP", 30080)],
    );
    let status = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    let lb = only_lb(&s.h);
    assert_eq!(lb.private_net.len(), 1);
    assert!(lb.targets.iter().all(|t| t.use_private_ip == Some(true)) && lb.targets.len() == 2);
    let private = &lb.private_net[0].ip;
    assert!(private.starts_with("10.0.0."), "{private}");
    assert_eq!(status.ingress.last().and_then(|i| i.ip.clone()), Some(private.clone()), "private ingress IP reported");
}

#[tokio::test]
async fn a_fixed_private_ip_is_attached_after_the_create_then_the_private_targets_follow() {
    let (s, net) = setup_net().await;
    let nodes = seed_nodes(&s.h, 2, Some(net));
    let svc = service(
        &[
            (a::LOCATION, "fsn1"),
            (a::USE_PRIVATE_IP, "true"),
            (a::PRIVATE_IPV4, "10.0.0.77"),
            (a::USES_PROXYPROTOCOL, "true"),
        ],
        &[(80, "TCP", 30080)],
    );
    let status = s.lbs.ensure_load_balancer("k", &svc, &nodes).await.expect("ensure");
    assert_eq!(
        mutating(&s.h),
        vec![
            "POST /v1/load_balancers",
            "POST /v1/load_balancers/{id}/actions/attach_to_network",
            "POST /v1/load_balancers/{id}/actions/add_target",
            "POST /v1/load_balancers/{id}/actions/add_target"
        ]
    );
    settle(&s).await;
    let lb = only_lb(&s.h);
    assert_eq!(lb.private_net.iter().map(|n| n.ip.as_str()).collect::<Vec<_>>(), vec!["10.0.0.77"]);
    assert_eq!(lb.targets.len(), 2);
    assert!(lb.services[0].proxyprotocol);
    let ingress: Vec<(Option<String>, Option<IpMode>)> =
        status.ingress.iter().map(|i| (i.ip.clone(), i.ip_mode)).collect();
    assert_eq!(ingress.last(), Some(&(Some("10.0.0.77".to_owned()), Some(IpMode::Proxy))));
    assert!(ingress.iter().all(|(_, m)| *m == Some(IpMode::Proxy)), "{ingress:?}");

    // A new fixed IP: detach, attach with it, the private targets again.
    let moved = service(
        &[
            (a::LOCATION, "fsn1"),
            (a::USE_PRIVATE_IP, "true"),
            (a::PRIVATE_IPV4, "10.0.0.88"),
            (a::USES_PROXYPROTOCOL, "true"),
        ],
        &[(80, "TCP", 30080)],
    );
    s.h.reset_requests();
    s.lbs.ensure_load_balancer("k", &moved, &nodes).await.expect("ensure");
    assert_eq!(
        mutating(&s.h),
        vec![
            "POST /v1/load_balancers/{id}/actions/detach_from_network",
            "POST /v1/load_balancers/{id}/actions/attach_to_network",
            "POST /v1/load_balancers/{id}/actions/add_target",
            "POST /v1/load_balancers/{id}/actions/add_target"
        ]
    );
    settle(&s).await;
    let lb = only_lb(&s.h);
    assert_eq!(lb.private_net.iter().map(|n| n.ip.as_str()).collect::<Vec<_>>(), vec!["10.0.0.88"]);
    assert_eq!(lb.targets.len(), 2);
}

#[tokio::test]
async fn get_load_balancer_finds_by_label_only_and_reports_the_hostname() {
    let s = setup().await;
    let named = service(&[(a::NAME, "shop-web"), (a::HOSTNAME, "lb.example.com")], &[(80, "TCP", 30080)]);
    s.h.seed_load_balancer(&SeedLoadBalancer::new("shop-web")).expect("lb");
    assert_eq!(s.lbs.get_load_balancer("k", &named).await.expect("get"), None, "a name alone is not enough");
    assert_eq!(s.lbs.get_load_balancer_name("k", &named), "shop-web");
    s.lbs.ensure_load_balancer("k", &named, &[]).await.expect("adopt");
    let status = s.lbs.get_load_balancer("k", &named).await.expect("get").expect("found by label now");
    assert_eq!(status.ingress.len(), 1);
    assert_eq!(status.ingress[0].hostname.as_deref(), Some("lb.example.com"));
    assert_eq!((status.ingress[0].ip.as_deref(), status.ingress[0].ip_mode), (None, None));
}

#[tokio::test]
async fn load_balancers_are_offered_unless_disabled_and_events_reach_the_sink() {
    use cloud_provider::Cloud as _;
    use hcloud_provider::{ClientHooks, Config, HcloudCloud};
    let fake = hcloud_fake::FakeServer::start(hcloud_fake::FakeConfig::default()).await.expect("fake");
    let url = fake.base_url();
    let config = |enabled: &str| {
        let enabled = enabled.to_owned();
        Config::from_env(
            |k| match k {
                "HCLOUD_TOKEN" => Some("t".repeat(64)),
                "HCLOUD_ENDPOINT" => Some(url.clone()),
                "HCLOUD_LOAD_BALANCERS_ENABLED" => Some(enabled.clone()),
                "HCLOUD_LOAD_BALANCERS_LOCATION" => Some("fsn1".into()),
                _ => None,
            },
            Vec::new(),
        )
        .expect("config")
    };
    let off = HcloudCloud::connect(&config("false"), ClientHooks::default()).await.expect("connect");
    assert!(off.load_balancer().is_none(), "HCLOUD_LOAD_BALANCERS_ENABLED=false");
    let on = HcloudCloud::connect(&config("true"), ClientHooks::default()).await.expect("connect");
    let events = std::sync::Arc::new(Events::default());
    on.initialize(events.clone());
    let lb = on.load_balancer().expect("offered by default");
    lb.ensure_load_balancer("k", &service(&[(a::TYPE, "lb11")], &[(53, "UDP", 30053), (80, "TCP", 30080)]), &[])
        .await
        .expect("ensure");
    assert_eq!(events.with_reason("UnsupportedProtocolConfigured").len(), 1, "{:?}", events.reasons());
    assert_eq!(fake.handle().snapshot().load_balancers.len(), 1);
}

/// A sync plans against the Load Balancer it read, so two calls for one Service at once would
/// act on each other's half-sent plans: the service controller serialises them (this provider
/// no longer keeps a lock of its own).
#[tokio::test]
async fn calls_for_one_service_must_not_overlap() {
    let s = setup().await;
    assert!(!s.lbs.calls_for_one_service_may_overlap());
}
