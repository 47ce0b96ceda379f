//! An HTTP client for the scenario that checks every exchange against the description:
//! the request body against the operation's request schema, the response body against its
//! response schema (closed: no undefined fields), an error's code against the operation's
//! error table, and, once per operation, that the fake rejects a body missing each field the
//! operation requires (`invalid_input` naming the field).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use super::spec::{Spec, defaulted};

/// The checking client.
pub struct Client {
    http: reqwest::Client,
    base: String,
    pub spec: Spec,
    validators: HashMap<String, jsonschema::Validator>,
    /// Response bodies validated.
    pub validated: usize,
    /// Request bodies validated.
    pub requests_validated: usize,
    /// Required request fields whose absence was checked.
    pub required_checked: usize,
    /// Error codes checked against the operations' tables, as `METHOD template code`.
    pub error_codes: BTreeSet<String>,
    /// Everything that did not conform.
    pub failures: Vec<String>,
    /// `METHOD template status` of every exchange.
    pub covered: Vec<String>,
    probed: BTreeSet<String>,
}

impl Client {
    pub fn new(base: String, spec: Spec) -> Self {
        Self {
            http: reqwest::Client::new(),
            base,
            spec,
            validators: HashMap::new(),
            validated: 0,
            requests_validated: 0,
            required_checked: 0,
            error_codes: BTreeSet::new(),
            failures: Vec::new(),
            covered: Vec::new(),
            probed: BTreeSet::new(),
        }
    }

    /// Schema errors of `body`; for a request, a missing field the API defaults for
    /// `op` (`method template`) is not an error.
    fn validate(&mut self, schema: &Value, request: Option<(&str, &str)>, body: &Value) -> Vec<String> {
        let key = format!("{}{schema}", request.is_some());
        if !self.validators.contains_key(&key) {
            let mut root = super::spec::convert(schema, request.is_none());
            if let Value::Object(o) = &mut root {
                o.insert("$schema".into(), json!("https://json-schema.org/draft/2020-12/schema"));
                let defs = if request.is_some() { &self.spec.request_defs } else { &self.spec.response_defs };
                o.insert("$defs".into(), defs.clone());
            }
            let v = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .with_keyword(super::spec::INTEGER_LITERAL_KEYWORD, |_, _, _| Ok(Box::new(super::spec::IntegerLiteral)))
                .build(&root)
                .unwrap_or_else(|e| panic!("schema compiles: {e}"));
            self.validators.insert(key.clone(), v);
        }
        self.validators[&key]
            .iter_errors(body)
            .filter(|e| match (e.kind(), request) {
                (jsonschema::error::ValidationErrorKind::Required { property }, Some((m, t))) => {
                    !property.as_str().is_some_and(|f| defaulted(m, t, f))
                }
                _ => true,
            })
            .take(5)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect()
    }

    /// Validates a served body as the response of `method template` with `status`.
    pub fn check_response(&mut self, template: &str, method: &Method, status: u16, body: &Value) {
        let m = method.as_str().to_ascii_lowercase();
        self.covered.push(format!("{} {template} {status}", method.as_str()));
        let Some(schema) = self.spec.response_schema(template, &m, status) else {
            if !body.is_null() {
                self.failures
                    .push(format!("{method} {template} -> {status}: no body in the description, fake sent {body}"));
            }
            return;
        };
        let errors = self.validate(&schema, None, body);
        self.validated += 1;
        if !errors.is_empty() {
            self.failures
                .push(format!("{method} {template} -> {status}:\n    {}\n    body: {body}", errors.join("\n    ")));
        }
        if status >= 400
            && let Some(code) = body["error"]["code"].as_str()
        {
            self.error_codes.insert(format!("{} {template} {code}", method.as_str()));
            if let Err(e) = self.spec.allows_error(template, &m, code, status) {
                self.failures.push(format!("{method} {template} -> {status} {code}: {e}"));
            }
        }
    }

    async fn send(&self, method: &Method, path: &str, body: Option<&Value>, token: Option<&str>) -> (u16, Value) {
        let mut req = self.http.request(method.clone(), format!("{}{}", self.base, path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.expect("body");
        let value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("JSON body") };
        (status, value)
    }

    /// Calls `path` (concrete) for the operation `template`, checks everything, returns the answer.
    pub async fn call(&mut self, method: Method, template: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as(method, template, path, body, Some("token")).await
    }

    pub async fn call_as(
        &mut self,
        method: Method,
        template: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let m = method.as_str().to_ascii_lowercase();
        let request_schema = self.spec.request_schema(template, &m);
        if let (Some(schema), Some(b)) = (&request_schema, &body) {
            let errors = self.validate(schema, Some((&m, template)), b);
            self.requests_validated += 1;
            if !errors.is_empty() {
                self.failures
                    .push(format!("request {method} {template}:\n    {}\n    body: {b}", errors.join("\n    ")));
            }
        }
        let (status, value) = self.send(&method, path, body.as_ref(), token).await;
        self.check_response(template, &method, status, &value);
        if (200..300).contains(&status)
            && let (Some(schema), Some(b)) = (request_schema, body)
            && self.probed.insert(format!("{m} {template}"))
        {
            self.probe_required(&method, template, path, &schema, &b).await;
        }
        (status, value)
    }

    /// The fake must reject `body` without each required field (see the module docs).
    async fn probe_required(&mut self, method: &Method, template: &str, path: &str, schema: &Value, body: &Value) {
        let m = method.as_str().to_ascii_lowercase();
        let required: Vec<String> =
            schema["required"].as_array().into_iter().flatten().filter_map(|f| f.as_str().map(str::to_owned)).collect();
        for field in required {
            if defaulted(&m, template, &field) {
                continue;
            }
            let mut without = body.clone();
            if without.as_object_mut().and_then(|o| o.remove(&field)).is_none() {
                continue;
            }
            let (status, answer) = self.send(method, path, Some(&without), Some("token")).await;
            self.check_response(template, method, status, &answer);
            self.required_checked += 1;
            let named = answer["error"]["details"]["fields"][0]["name"].as_str().unwrap_or_default().to_owned();
            if (status, answer["error"]["code"].as_str(), named.as_str())
                != (400, Some("invalid_input"), field.as_str())
            {
                self.failures.push(format!(
                    "{method} {template} without required `{field}`: expected 400 invalid_input naming it, got {status} {answer}"
                ));
            }
        }
    }

    pub async fn get(&mut self, template: &str, path: &str) -> Value {
        let (status, body) = self.call(Method::GET, template, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// POSTs an action, expects 201, waits for it (checking the polls), returns its id.
    pub async fn act(&mut self, template: &str, path: &str, body: Value) -> u64 {
        let (status, resp) = self.call(Method::POST, template, path, Some(body)).await;
        assert_eq!(status, 201, "POST {path}: {resp}");
        let id = resp["action"]["id"].as_u64().expect("action id");
        self.wait(id).await;
        id
    }

    pub async fn wait(&mut self, id: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let body = self.get("/actions/{id}", &format!("/actions/{id}")).await;
            if body["action"]["status"] != "running" {
                return body["action"].clone();
            }
            assert!(Instant::now() < deadline, "action {id} did not finish");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn expect_error(
        &mut self,
        method: Method,
        template: &str,
        path: &str,
        body: Option<Value>,
        status: u16,
        code: &str,
    ) {
        let (s, b) = self.call(method, template, path, body).await;
        assert_eq!((s, b["error"]["code"].as_str()), (status, Some(code)), "{path}: {b}");
    }
}
