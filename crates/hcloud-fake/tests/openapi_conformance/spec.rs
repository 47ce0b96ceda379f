//! The OpenAPI description as validators: response and request schemas per operation, the
//! operation-specific error codes of each operation, and the explicit allow-list of API
//! changes newer than the file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{Map, Value, json};

/// Where the description is read from.
pub fn spec_path() -> PathBuf {
    match std::env::var_os("HCLOUD_OPENAPI_SPEC") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/hcloud-openapi/hcloud.json"),
    }
}

/// Error codes every operation may answer (hcloud-go's general error codes, plus
/// `bad_gateway`, which the README's list of newer changes names).
pub const GENERAL_ERROR_CODES: &[&str] = &[
    "service_error",
    "rate_limit_exceeded",
    "unknown_error",
    "not_found",
    "invalid_input",
    "forbidden",
    "unauthorized",
    "json_error",
    "locked",
    "resource_limit_exceeded",
    "resource_unavailable",
    "uniqueness_error",
    "protected",
    "maintenance",
    "conflict",
    "robot_unavailable",
    "resource_locked",
    "server_error",
    "token_readonly",
    "timeout",
    "unsupported_error",
    "deprecated_api_endpoint",
    "bad_gateway",
];

/// Operation-specific codes the fake answers where the file's table for the operation is
/// silent. Each one is explained; nothing else outside [`GENERAL_ERROR_CODES`] and the
/// operation's own table is accepted.
pub const EXTRA_OPERATION_CODES: &[(&str, &str, &str, &str)] = &[
    (
        "delete",
        "/certificates/{id}",
        "resource_in_use",
        "the file lists no errors for this operation; hcloud-go names `resource_in_use` for deleting what is in use",
    ),
    (
        "post",
        "/servers/{id}/actions/detach_from_network",
        "server_not_attached_to_network",
        "the file's table is empty; hcloud-go's code for a server not in the network",
    ),
    (
        "post",
        "/load_balancers/{id}/actions/detach_from_network",
        "load_balancer_not_attached_to_network",
        "the file's table is empty; the code its other Load Balancer operations use for this condition",
    ),
];

/// Fields (at any depth of the body) a request schema marks required that the API defaults:
/// hcloud-go's request types omit them when unset (`omitempty`) and HCCM sends them only when
/// configured, so the API accepts bodies without them; the fake defaults them too. A request
/// body may lack them, and the required-field probes skip them.
pub const DEFAULTED_REQUIRED_FIELDS: &[(&str, &str, &str)] = &[
    ("post", "/load_balancers/{id}/actions/add_service", "listen_port"),
    ("post", "/load_balancers/{id}/actions/add_service", "destination_port"),
    ("post", "/load_balancers/{id}/actions/add_service", "proxyprotocol"),
    ("post", "/load_balancers/{id}/actions/add_service", "health_check"),
    ("post", "/load_balancers/{id}/actions/add_service", "domain"),
    ("post", "/load_balancers/{id}/actions/add_service", "response"),
    ("post", "/load_balancers/{id}/actions/add_service", "status_codes"),
    ("post", "/load_balancers/{id}/actions/add_service", "tls"),
    ("post", "/load_balancers", "domain"),
    ("post", "/load_balancers", "response"),
    ("post", "/load_balancers", "status_codes"),
    ("post", "/load_balancers", "tls"),
];

/// Whether the API defaults `field` of a request body of `method template`.
pub fn defaulted(method: &str, template: &str, field: &str) -> bool {
    DEFAULTED_REQUIRED_FIELDS.iter().any(|(m, t, f)| *m == method && *t == template && *f == field)
}

/// Fields the description types as `number` that the API sends as integers, with the reason we
/// know. Response validation treats them as `integer` written as an integer literal, so a fake
/// that sends `40.0` fails as it fails hcloud-go (`cannot unmarshal number 40.0 into ... int`).
pub const INTEGER_NUMBER_FIELDS: &[(&str, &str, &str)] = &[
    ("server_type", "disk", "hcloud-go decodes server_type.disk into an int (schema.ServerType.Disk)"),
    ("volume", "size", "hcloud-go decodes volume.size into an int (schema.Volume.Size)"),
];

/// The custom keyword every `integer` gets in [`convert`]: the value must be written as an
/// integer literal (`40`, not `40.0`). JSON Schema alone counts `40.0` as an integer, but Go's
/// `encoding/json` refuses to decode it into an `int`, so the real API never sends it.
pub const INTEGER_LITERAL_KEYWORD: &str = "x-integer-literal";

/// The [`INTEGER_LITERAL_KEYWORD`] check: a number must be an integer literal (serde_json keeps
/// `40.0` as a float and `40` as an integer); anything else is the `type` keyword's business.
pub struct IntegerLiteral;

impl<'i> jsonschema::Keyword<'i> for IntegerLiteral {
    fn validate(&self, instance: &'i Value) -> Result<(), jsonschema::ValidationError<'i>> {
        if jsonschema::Keyword::is_valid(self, instance) {
            Ok(())
        } else {
            Err(jsonschema::ValidationError::custom(format!(
                "{instance} is written as a float; the API sends this field as an integer literal"
            )))
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        !instance.is_f64()
    }
}

/// Turns the [`INTEGER_NUMBER_FIELDS`] into `integer`s; every entry must match.
fn apply_integer_facts(schemas: &mut Value) {
    for (schema, field, why) in INTEGER_NUMBER_FIELDS {
        let property = &mut schemas[*schema]["properties"][*field];
        assert_eq!(property["type"], "number", "{schema}.{field} ({why}) is no longer a `number` in the description");
        property["type"] = json!("integer");
    }
}

/// OpenAPI 3.0 schema object -> JSON Schema 2020-12: `#/components/schemas/X` becomes
/// `#/$defs/X`, `nullable: true` admits `null`, an `integer` must be written as an integer
/// ([`INTEGER_LITERAL_KEYWORD`]), `format` is kept only for `date-time`,
/// OpenAPI-only keywords are dropped. With `closed`, every object schema with `properties`
/// and no `additionalProperties` of its own gets `additionalProperties: false`, so a field
/// the description does not define fails validation.
pub fn convert(schema: &Value, closed: bool) -> Value {
    let Value::Object(obj) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    let nullable = obj.get("nullable") == Some(&Value::Bool(true));
    for (k, v) in obj {
        match k.as_str() {
            "nullable" | "example" | "examples" | "discriminator" | "xml" | "externalDocs" | "readOnly"
            | "writeOnly" | "deprecated" | "default" | "description" | "title" => {}
            "format" => {
                if v == "date-time" {
                    out.insert(k.clone(), v.clone());
                }
            }
            "$ref" => {
                let r = v.as_str().unwrap_or_default();
                let name = r.trim_start_matches("#/components/schemas/");
                out.insert(k.clone(), json!(format!("#/$defs/{name}")));
            }
            "properties" | "patternProperties" => {
                let props = v
                    .as_object()
                    .map(|m| m.iter().map(|(name, s)| (name.clone(), convert(s, closed))).collect::<Map<_, _>>())
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" | "not" => {
                out.insert(k.clone(), convert(v, closed));
            }
            "allOf" | "anyOf" | "oneOf" => {
                let list =
                    v.as_array().map(|a| a.iter().map(|s| convert(s, closed)).collect::<Vec<_>>()).unwrap_or_default();
                out.insert(k.clone(), Value::Array(list));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if out.get("type") == Some(&json!("integer")) {
        out.insert(INTEGER_LITERAL_KEYWORD.into(), Value::Bool(true));
    }
    if closed && out.contains_key("properties") && !out.contains_key("additionalProperties") {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    if !nullable {
        return Value::Object(out);
    }
    if let Some(t) = out.get("type").cloned() {
        let types = match t {
            Value::Array(mut a) => {
                a.push(json!("null"));
                Value::Array(a)
            }
            other => json!([other, "null"]),
        };
        out.insert("type".into(), types);
        if let Some(Value::Array(e)) = out.get_mut("enum") {
            e.push(Value::Null);
        }
        Value::Object(out)
    } else {
        json!({"anyOf": [{"type": "null"}, Value::Object(out)]})
    }
}

fn obj_mut<'a>(v: &'a mut Value, what: &str) -> &'a mut Map<String, Value> {
    v.as_object_mut().unwrap_or_else(|| panic!("{what} is an object"))
}

fn add_property(schema: &mut Value, name: &str, property: Value, required: bool) {
    obj_mut(schema, "schema").entry("properties").or_insert_with(|| json!({}));
    obj_mut(&mut schema["properties"], "properties").insert(name.to_owned(), property);
    if required {
        let req = obj_mut(schema, "schema").entry("required").or_insert_with(|| json!([]));
        req.as_array_mut().expect("required is an array").push(json!(name));
    }
}

fn remove_property(schema: &mut Value, name: &str) {
    if let Some(p) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        p.remove(name);
    }
    if let Some(r) = schema.get_mut("required").and_then(Value::as_array_mut) {
        r.retain(|f| f != name);
    }
}

/// Applies `f` to every object schema (anywhere in `v`) whose properties include all of `sig`.
fn patch_where(v: &mut Value, sig: &[&str], count: &mut usize, f: &dyn Fn(&mut Value)) {
    match v {
        Value::Object(o) => {
            let matches =
                o.get("properties").and_then(Value::as_object).is_some_and(|p| sig.iter().all(|k| p.contains_key(*k)));
            if matches {
                f(v);
                *count += 1;
            }
            if let Value::Object(o) = v {
                for (_, child) in o.iter_mut() {
                    patch_where(child, sig, count, f);
                }
            }
        }
        Value::Array(a) => {
            for child in a {
                patch_where(child, sig, count, f);
            }
        }
        _ => {}
    }
}

/// One newer API change: its description, the properties that identify the schemas it
/// touches, and the edit.
type NewerChange = (&'static str, Vec<&'static str>, Box<dyn Fn(&mut Value)>);

/// The API changes newer than the file (the README's list), applied to the raw OpenAPI
/// schemas before conversion. Every entry must match at least once; the counts are returned.
///
/// This is the complete allow-list of response fields the file does not define.
fn apply_newer_changes(schemas: &mut Value) -> BTreeMap<&'static str, usize> {
    let deprecation_info = json!({"$ref": "#/components/schemas/deprecation_info", "nullable": true});
    let patches: Vec<NewerChange> = vec![
        (
            "2026-04-01: server type locations[] carry `available` and `recommended`",
            vec!["id", "name", "deprecation"],
            Box::new(|s: &mut Value| {
                // Only the server type location (id, name, deprecation and nothing else).
                if s["properties"].as_object().is_some_and(|p| p.len() == 3) {
                    add_property(s, "available", json!({"type": "boolean"}), true);
                    add_property(s, "recommended", json!({"type": "boolean"}), true);
                }
            }),
        ),
        (
            "2026-04-30: Load Balancer HTTP services have `timeout_idle` (seconds)",
            vec!["cookie_name", "cookie_lifetime", "sticky_sessions"],
            Box::new(|s: &mut Value| {
                add_property(s, "timeout_idle", json!({"type": "integer", "minimum": 0}), false);
            }),
        ),
        (
            "2026-04-27/08-01: Primary IP `assignee_type` reads `unassigned`; optional on create",
            vec!["assignee_type", "assignee_id"],
            Box::new(|s: &mut Value| {
                if let Some(e) = s["properties"]["assignee_type"].get_mut("enum").and_then(Value::as_array_mut) {
                    e.push(json!("unassigned"));
                }
                if s["properties"].get("ip").is_none()
                    && let Some(r) = s.get_mut("required").and_then(Value::as_array_mut)
                {
                    // The create request (it has no `ip`): assignee_type is optional now.
                    r.retain(|f| f != "assignee_type");
                }
            }),
        ),
        (
            "2026-07-01: `datacenter` removed from Primary IP responses (use `location`)",
            vec!["assignee_type", "assignee_id", "ip"],
            Box::new(|s: &mut Value| remove_property(s, "datacenter")),
        ),
        (
            "2026-07-01: `datacenter` removed from Server responses (use `location`)",
            vec!["server_type", "public_net", "datacenter"],
            Box::new(|s: &mut Value| remove_property(s, "datacenter")),
        ),
        (
            "Load Balancer Types carry `deprecation` (like Server Types)",
            vec!["max_connections", "max_services", "max_targets"],
            Box::new(move |s: &mut Value| add_property(s, "deprecation", deprecation_info.clone(), true)),
        ),
    ];
    let mut counts = BTreeMap::new();
    for (name, sig, f) in &patches {
        let mut n = 0;
        patch_where(schemas, sig, &mut n, f.as_ref());
        counts.insert(*name, n);
    }
    counts
}

/// Responses changed since the file: (method, path template, status) -> schema.
fn newer_response(method: &str, template: &str, status: u16) -> Option<Value> {
    match (method, template, status) {
        // DELETE /load_balancers/{id} answers 200 with an action today (the file: 204, no body).
        ("delete", "/load_balancers/{id}", 200) => Some(json!({
            "type": "object", "required": ["action"],
            "properties": {"action": {"$ref": "#/components/schemas/action"}}
        })),
        _ => None,
    }
}

/// The loaded description.
pub struct Spec {
    /// The (patched) OpenAPI document.
    pub doc: Value,
    /// `components.schemas`, converted and closed, for responses.
    pub response_defs: Value,
    /// `components.schemas`, converted, for requests.
    pub request_defs: Value,
    /// How often each newer-change patch matched.
    pub patches: BTreeMap<&'static str, usize>,
}

impl Spec {
    /// Loads the description; a missing file fails the test.
    pub fn load() -> Self {
        let path = spec_path();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "the OpenAPI description is required and was not found at {} ({e}); \
                 point HCLOUD_OPENAPI_SPEC at hcloud.json",
                path.display()
            )
        });
        let mut doc: Value = serde_json::from_str(&text).expect("the description is JSON");
        let patches = apply_newer_changes(&mut doc["components"]["schemas"]);
        apply_integer_facts(&mut doc["components"]["schemas"]);
        for (name, n) in &patches {
            assert!(
                *n > 0,
                "newer-change patch '{name}' matched nothing: the description changed, review the allow-list"
            );
        }
        let schemas = doc["components"]["schemas"].as_object().expect("components.schemas").clone();
        let defs = |closed: bool| Value::Object(schemas.iter().map(|(k, v)| (k.clone(), convert(v, closed))).collect());
        Self { response_defs: defs(true), request_defs: defs(false), doc, patches }
    }

    /// The response schema of an operation for a status (exact, `2xx`/`4xx`/`5xx`, `default`).
    /// `None`: the operation answers that status without a body.
    pub fn response_schema(&self, template: &str, method: &str, status: u16) -> Option<Value> {
        if let Some(s) = newer_response(method, template, status) {
            return Some(s);
        }
        let responses = &self.doc["paths"][template][method]["responses"];
        assert!(responses.is_object(), "operation {method} {template} is not in the description");
        let class = format!("{}xx", status / 100);
        let resp = [status.to_string(), class, "default".to_owned()]
            .iter()
            .find_map(|k| responses.get(k))
            .unwrap_or_else(|| panic!("{method} {template}: the description has no response for {status}"));
        resp.get("content").and_then(|c| c.get("application/json")).and_then(|c| c.get("schema")).cloned()
    }

    /// The request body schema of an operation, if it takes one (`$ref`s resolved at the top).
    pub fn request_schema(&self, template: &str, method: &str) -> Option<Value> {
        let mut s = self.doc["paths"][template][method]["requestBody"]["content"]["application/json"]["schema"].clone();
        while let Some(r) = s.get("$ref").and_then(Value::as_str) {
            s = self.doc["components"]["schemas"][r.trim_start_matches("#/components/schemas/")].clone();
        }
        (!s.is_null()).then_some(s)
    }

    /// The operation-specific error codes of an operation: code -> explicit status, if any.
    pub fn operation_errors(&self, template: &str, method: &str) -> BTreeMap<String, Option<u16>> {
        let description = self.doc["paths"][template][method]["description"].as_str().unwrap_or_default();
        let mut out = BTreeMap::new();
        for line in description.lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // | `422` | `code` | description |   or   |  | `code` | description |
            if cells.len() >= 4 && cells[2].starts_with('`') && cells[2].ends_with('`') && cells[2].len() > 2 {
                let code = cells[2].trim_matches('`').to_owned();
                let status = cells[1].trim_matches('`').parse::<u16>().ok();
                out.insert(code, status);
            }
        }
        out
    }

    /// Whether the fake may answer `code` for an operation (see the module docs).
    pub fn allows_error(&self, template: &str, method: &str, code: &str, status: u16) -> Result<(), String> {
        let table = self.operation_errors(template, method);
        if let Some(expected) = table.get(code) {
            return match expected {
                Some(s) if *s != status => {
                    Err(format!("the description says {s} for `{code}`, the fake answered {status}"))
                }
                _ => Ok(()),
            };
        }
        if GENERAL_ERROR_CODES.contains(&code) {
            return Ok(());
        }
        if EXTRA_OPERATION_CODES.iter().any(|(m, t, c, _)| *m == method && *t == template && *c == code) {
            return Ok(());
        }
        let listed: BTreeSet<&String> = table.keys().collect();
        Err(format!("`{code}` is neither a general code nor one of this operation's {listed:?}"))
    }
}
