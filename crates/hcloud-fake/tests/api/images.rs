//! `/images`: the hcloud CLI's `image list` and `server create --image NAME` (which looks the
//! image up with `GET /images?name=NAME&architecture=ARCH&include_deprecated=true`) answered
//! `no such endpoint`.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::common::Fx;

fn names_and_arches(body: &Value) -> Vec<(String, String)> {
    body["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["name"].as_str().unwrap().to_owned(), i["architecture"].as_str().unwrap().to_owned()))
        .collect()
}

#[tokio::test]
async fn images_are_listed_filtered_sorted_and_fetched() {
    let fx = Fx::instant().await;
    // What hcloud-go asks for `server create --image ubuntu-24.04 --type cx23`.
    let r = fx.get("/images?name=ubuntu-24.04&architecture=x86&include_deprecated=true").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(names_and_arches(&r.body), vec![("ubuntu-24.04".to_owned(), "x86".to_owned())]);
    let image = r.body["images"][0].clone();
    assert_eq!(image["type"], "system");
    assert_eq!(image["status"], "available");
    assert_eq!(image["os_flavor"], "ubuntu");
    assert_eq!(image["os_version"], "24.04");
    assert_eq!(image["bound_to"], Value::Null);
    assert_eq!(image["created_from"], Value::Null);
    assert_eq!(image["deprecated"], Value::Null);
    assert_eq!(image["protection"], json!({"delete": false}));
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 1);

    // The image a created server embeds is the one `GET /images/{id}` serves.
    let id = image["id"].as_u64().unwrap();
    let r = fx.get(&format!("/images/{id}")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["image"], image);
    let s = fx.post("/servers", json!({"name": "a", "server_type": "cx23", "image": id})).await;
    assert_eq!(s.body["server"]["image"], image);
    assert_eq!(fx.get("/images/12345").await.code(), "not_found");

    // `image list --type system` (the CLI always sends include_deprecated=true and sort).
    let all = fx.get("/images?type=system&include_deprecated=true&sort=id:asc&per_page=50").await;
    let all_names = names_and_arches(&all.body);
    assert_eq!(all_names.len(), 16);
    assert!(all_names.contains(&("ubuntu-20.04".to_owned(), "arm".to_owned())));
    // Deprecated images are left out unless asked for.
    let current = fx.get("/images?per_page=50").await;
    assert_eq!(current.body["images"].as_array().unwrap().len(), 14);
    assert!(current.body["images"].as_array().unwrap().iter().all(|i| i["deprecated"].is_null()));
    let deprecated = fx.get("/images?name=ubuntu-20.04&include_deprecated=true").await;
    assert_eq!(deprecated.body["images"][0]["deprecated"], "2025-06-01T00:00:00+00:00");

    let arm = fx.get("/images?architecture=arm&status=available&per_page=50").await;
    assert_eq!(arm.body["images"].as_array().unwrap().len(), 7);
    assert!(arm.body["images"].as_array().unwrap().iter().all(|i| i["architecture"] == "arm"));
    for empty in ["/images?type=snapshot", "/images?status=creating", "/images?bound_to=10000001"] {
        assert_eq!(fx.get(empty).await.body["images"], json!([]), "{empty}");
    }
    assert_eq!(fx.get("/images?label_selector=x").await.body["images"], json!([]));
    assert_eq!(fx.get("/images?label_selector=!x").await.body["meta"]["pagination"]["total_entries"], 14);

    // Sorted and paged.
    let sorted = fx.get("/images?sort=name:desc&sort=id:asc&per_page=2&page=1").await;
    assert_eq!(
        names_and_arches(&sorted.body),
        vec![("ubuntu-24.04".to_owned(), "x86".to_owned()), ("ubuntu-24.04".to_owned(), "arm".to_owned())]
    );
    assert_eq!(sorted.body["meta"]["pagination"]["next_page"], 2);
    let by_id = fx.get("/images?sort=id:desc&per_page=1").await;
    assert_eq!(by_id.body["images"][0]["name"], "fedora-42");

    for bad in ["/images?type=iso", "/images?architecture=riscv", "/images?sort=size", "/images?include_deprecated=1"] {
        let r = fx.get(bad).await;
        assert_eq!((r.status, r.code()), (400, "invalid_input"), "{bad}: {}", r.body);
    }
}
