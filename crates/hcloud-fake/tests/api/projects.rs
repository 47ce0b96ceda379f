//! Projects: a token sees only its own project's resources, as on Hetzner; a single-project
//! fake is unchanged.

use hcloud_fake::control::{SeedNetwork, SeedServer};
use hcloud_fake::{DEFAULT_PROJECT, SeedProject, TokenPolicy};
use pretty_assertions::assert_eq;
use reqwest::Method;
use serde_json::{Value, json};

use super::common::{Fx, TOKEN};

const OTHER: &str = "other-project-token";

/// The ids in a list answer's `key`.
fn ids(body: &Value, key: &str) -> Vec<u64> {
    body[key].as_array().expect("a list").iter().map(|v| v["id"].as_u64().expect("id")).collect()
}

#[tokio::test]
async fn a_token_sees_only_its_own_projects_resources() {
    let fx = Fx::instant().await;
    let mine = fx.h.seed_server(&SeedServer::new("node-1")).expect("seeded in the default project");
    let net = fx.h.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8")).expect("network");
    let r = fx.control(Method::POST, "/projects", Some(json!({"name": "other", "tokens": [OTHER]}))).await;
    assert_eq!((r.status, r.body.clone()), (201, json!({"name": "other"})));
    let other = fx.h.project("other").expect("added");
    let theirs = other.seed_server(&SeedServer::new("node-1")).expect("seeded in the other project");
    let fx = &fx;
    let call = |path: &str, token: &'static str| {
        let url = format!("{}{path}", fx.base);
        async move { fx.call_with(Method::GET, &url, Some(token), None).await }
    };

    // Ids are global: the other project's server is a real 404 for this token, and the reverse.
    assert_eq!(call(&format!("/servers/{mine}"), TOKEN).await.status, 200);
    let r = call(&format!("/servers/{mine}"), OTHER).await;
    assert_eq!((r.status, r.code()), (404, "not_found"));
    assert_eq!(call(&format!("/servers/{theirs}"), TOKEN).await.status, 404);
    assert_eq!(ids(&call("/servers", TOKEN).await.body, "servers"), vec![mine]);
    assert_eq!(ids(&call("/servers", OTHER).await.body, "servers"), vec![theirs]);
    assert_eq!(call(&format!("/networks/{net}"), OTHER).await.status, 404);
    assert!(ids(&call("/networks?name=k8s", OTHER).await.body, "networks").is_empty());
    assert_eq!(call("/locations", OTHER).await.status, 200, "the catalog is the same for every project");

    // A resource created with a token belongs to that token's project.
    let url = format!("{}/load_balancers", fx.base);
    let body = json!({"name": "web", "load_balancer_type": "lb11", "location": "fsn1"});
    let r = fx.call_with(Method::POST, &url, Some(OTHER), Some(body)).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let lb = r.id("load_balancer");
    assert!(fx.h.snapshot().load_balancers.is_empty(), "not in the default project");
    assert_eq!(other.snapshot().load_balancers.iter().map(|l| l.id).collect::<Vec<_>>(), vec![lb]);
    let r = fx.control(Method::GET, "/projects/other/state", None).await;
    assert_eq!(ids(&r.body, "load_balancers"), vec![lb]);
    assert_eq!(call(&format!("/load_balancers/{lb}"), TOKEN).await.status, 404);
    // Its action is the other project's too.
    let action = call(&format!("/load_balancers/{lb}/actions"), OTHER).await;
    let action = ids(&action.body, "actions");
    assert!(!action.is_empty());
    assert_eq!(call(&format!("/actions/{}", action[0]), TOKEN).await.status, 404);

    // Seeding a project over HTTP; the list of projects shows fingerprints, never tokens.
    let r = fx
        .control(
            Method::POST,
            "/projects/other/seed",
            Some(json!({"networks": [{"name": "k8s", "ip_range": "10.0.0.0/8"}]})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(ids(&call("/networks?name=k8s", OTHER).await.body, "networks").len(), 1);
    assert_eq!(fx.control(Method::GET, "/projects/nope/state", None).await.status, 404);
    let listed = fx.control(Method::GET, "/projects", None).await.body;
    assert_eq!(listed[0]["name"], DEFAULT_PROJECT);
    assert_eq!(listed[1]["token_fingerprints"], json!([hcloud_fake::token_fingerprint(OTHER)]));
    assert!(!listed.to_string().contains(OTHER));
    let r = fx.control(Method::POST, "/projects", Some(json!({"name": "third", "tokens": [OTHER]}))).await;
    assert_eq!((r.status, r.code()), (400, "invalid_input"), "a token belongs to one project");
}

#[tokio::test]
async fn a_project_token_passes_an_allow_list_unless_a_deny_list_names_it() {
    let fx = Fx::instant().await;
    fx.h.set_token_policy(TokenPolicy::allow([TOKEN]));
    fx.h.add_project(&SeedProject::new("other", [OTHER])).expect("project");
    let url = format!("{}/servers", fx.base);
    assert_eq!(fx.call_with(Method::GET, &url, Some(OTHER), None).await.status, 200);
    assert_eq!(fx.call_with(Method::GET, &url, Some("unknown"), None).await.status, 401);
    fx.h.set_token_policy(TokenPolicy::deny([OTHER]));
    assert_eq!(fx.call_with(Method::GET, &url, Some(OTHER), None).await.status, 401, "revoked");
    fx.h.reset();
    assert_eq!(fx.h.projects().len(), 1);
    fx.h.set_token_policy(TokenPolicy::allow([TOKEN]));
    assert_eq!(fx.call_with(Method::GET, &url, Some(OTHER), None).await.status, 401, "gone with its project");
}
