//! Conformance with the Hetzner Cloud OpenAPI description, as the API is today.
//!
//! A scenario touches every endpoint the fake implements. Every exchange is checked
//! (`openapi_conformance/client.rs`):
//! - the response body against the operation's response schema, **closed** and **typed as the
//!   API sends it**: every `integer` must be an integer literal (`40`, not `40.0`, which
//!   JSON Schema accepts and hcloud-go refuses), and the `number` fields the API sends as
//!   integers are checked as integers (`spec::INTEGER_NUMBER_FIELDS`); an object may
//!   carry only the fields the description defines, plus the explicit, commented allow-list
//!   of API changes newer than the file (`openapi_conformance/spec.rs`,
//!   `apply_newer_changes`, from the hcloud-openapi README's list), so a field the fake
//!   invents fails;
//! - an error's code against the operation's table of operation-specific errors (and its
//!   status where the table names one), hcloud-go's general codes, or a short commented list
//!   of codes the file's tables omit;
//! - the request body against the operation's request schema, and once per operation that
//!   the fake rejects a body missing each field the schema requires (`invalid_input` naming
//!   the field), except the fields the API defaults (listed and explained).
//!
//! The description is read from `HCLOUD_OPENAPI_SPEC` or
//! `$CARGO_MANIFEST_DIR/../../../shared/hcloud-openapi/hcloud.json`; if it is missing the
//! test FAILS. Negative controls prove the validators can fail.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "openapi_conformance/client.rs"]
mod client;
#[path = "openapi_conformance/load_balancers.rs"]
mod load_balancers;
#[path = "openapi_conformance/resources.rs"]
mod resources;
#[path = "openapi_conformance/spec.rs"]
mod spec;

use std::time::Duration;

use hcloud_fake::{FakeConfig, FakeServer};
use reqwest::Method;
use serde_json::{Value, json};

use client::Client;
use spec::Spec;

/// The scenario must validate at least this many response bodies.
const MIN_VALIDATED: usize = 250;
/// ... this many request bodies ...
const MIN_REQUESTS: usize = 50;
/// ... probe this many required request fields ...
const MIN_REQUIRED_PROBES: usize = 25;
/// ... and check this many distinct (operation, error code) pairs.
const MIN_ERROR_CODES: usize = 40;

#[tokio::test]
async fn the_fake_conforms_to_the_openapi_description_and_todays_changes() {
    let spec = Spec::load();
    let fake = FakeServer::start(FakeConfig::default().with_action_delay(Duration::from_millis(20)))
        .await
        .expect("fake starts");
    let h = fake.handle();
    let mut c = Client::new(fake.base_url(), spec);

    let made = resources::run(&mut c, &h).await;
    let lbs = load_balancers::run(&mut c, &h, &made).await;
    negative_controls(&mut c, made.server, lbs.0).await;
    load_balancers::errors_and_deletes(&mut c, &h, &made, lbs).await;

    println!(
        "validated {} response bodies ({} exchanges), {} request bodies, {} required-field probes, {} error codes",
        c.validated,
        c.covered.len(),
        c.requests_validated,
        c.required_checked,
        c.error_codes.len()
    );
    for (name, n) in &c.spec.patches {
        println!("newer change applied {n}x: {name}");
    }
    let mut operations: Vec<String> =
        c.covered.iter().map(|k| k.rsplit_once(' ').map_or(k.clone(), |(op, _)| op.to_owned())).collect();
    operations.sort();
    operations.dedup();
    println!("{} operations covered:\n  {}", operations.len(), operations.join("\n  "));
    println!("error codes checked:\n  {}", c.error_codes.iter().cloned().collect::<Vec<_>>().join("\n  "));
    assert!(c.failures.is_empty(), "{} exchanges do not conform:\n{}", c.failures.len(), c.failures.join("\n"));
    assert!(c.validated >= MIN_VALIDATED, "only {} bodies validated (minimum {MIN_VALIDATED})", c.validated);
    assert!(c.requests_validated >= MIN_REQUESTS, "only {} requests validated", c.requests_validated);
    assert!(c.required_checked >= MIN_REQUIRED_PROBES, "only {} required fields probed", c.required_checked);
    assert!(c.error_codes.len() >= MIN_ERROR_CODES, "only {} error codes checked", c.error_codes.len());
    fake.shutdown().await;
}

/// The validators must reject broken variants of served bodies, so a vacuous schema
/// (unresolved refs, lost `required`, an open object) cannot make the test pass.
async fn negative_controls(c: &mut Client, server: u64, lb: u64) {
    let served = c.get("/servers/{id}", &format!("/servers/{server}")).await;
    let lb_body = c.get("/load_balancers/{id}", &format!("/load_balancers/{lb}")).await;
    let edit = |base: &Value, f: &dyn Fn(&mut Value)| {
        let mut b = base.clone();
        f(&mut b);
        b
    };
    let broken: Vec<(&str, &str, Value)> = vec![
        (
            "no location",
            "/servers/{id}",
            edit(&served, &|b| drop(b["server"].as_object_mut().unwrap().remove("location"))),
        ),
        ("bad status", "/servers/{id}", edit(&served, &|b| b["server"]["status"] = json!("exploded"))),
        ("null name", "/servers/{id}", edit(&served, &|b| b["server"]["name"] = Value::Null)),
        ("bad created", "/servers/{id}", edit(&served, &|b| b["server"]["created"] = json!("yesterday"))),
        ("an undefined field", "/servers/{id}", edit(&served, &|b| b["server"]["bogus"] = json!(1))),
        ("the removed datacenter", "/servers/{id}", edit(&served, &|b| b["server"]["datacenter"] = json!({"id": 1}))),
        (
            "no available",
            "/servers/{id}",
            edit(&served, &|b| {
                drop(b["server"]["server_type"]["locations"][0].as_object_mut().unwrap().remove("available"))
            }),
        ),
        (
            "server type disk as a float (hcloud-go: cannot unmarshal number 40.0 into an int)",
            "/servers/{id}",
            edit(&served, &|b| b["server"]["server_type"]["disk"] = json!(40.0)),
        ),
        ("cores as a float", "/servers/{id}", edit(&served, &|b| b["server"]["server_type"]["cores"] = json!(2.0))),
        ("an id as a float", "/servers/{id}", edit(&served, &|b| b["server"]["id"] = json!(7.0))),
        (
            "extra health check field",
            "/load_balancers/{id}",
            edit(&lb_body, &|b| b["load_balancer"]["services"][0]["health_check"]["bogus"] = json!(1)),
        ),
        (
            "timeout_idle as text",
            "/load_balancers/{id}",
            edit(&lb_body, &|b| b["load_balancer"]["services"][1]["http"]["timeout_idle"] = json!("30")),
        ),
    ];
    for (what, template, body) in broken {
        let before = c.failures.len();
        c.check_response(template, &Method::GET, 200, &body);
        c.validated -= 1;
        assert_eq!(c.failures.len(), before + 1, "negative control '{what}' passed");
        c.failures.pop();
    }
    // An error code the operation does not define is caught too.
    let before = c.failures.len();
    c.check_response(
        "/networks/{id}/actions/add_route",
        &Method::POST,
        422,
        &json!({"error": {"code": "target_already_defined", "message": "x", "details": {}}}),
    );
    assert_eq!(c.failures.len(), before + 1, "negative control 'foreign error code' passed");
    c.failures.pop();
}
