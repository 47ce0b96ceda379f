//! Shared helpers: a fake on 127.0.0.1 and a small JSON client.

use std::time::{Duration, Instant};

use hcloud_fake::{FakeConfig, FakeHandle, FakeServer};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;

pub const TOKEN: &str = "test-token";

/// One response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Resp {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    }
    pub fn id(&self, key: &str) -> u64 {
        self.body[key]["id"].as_u64().expect("id in body")
    }
}

/// A running fake and a client for it.
pub struct Fx {
    pub fake: FakeServer,
    pub h: FakeHandle,
    pub client: reqwest::Client,
    pub base: String,
    pub token: Option<String>,
}

impl Fx {
    pub async fn new(config: FakeConfig) -> Self {
        let fake = FakeServer::start(config).await.expect("fake starts");
        let h = fake.handle();
        let base = fake.base_url();
        Self { fake, h, client: reqwest::Client::new(), base, token: Some(TOKEN.to_owned()) }
    }

    /// A fake whose actions finish immediately.
    pub async fn instant() -> Self {
        Self::new(FakeConfig::default().with_action_delay(Duration::ZERO)).await
    }

    pub async fn call_with(&self, method: Method, url: &str, token: Option<&str>, body: Option<Value>) -> Resp {
        let mut req = self.client.request(method, url);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request succeeds");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body");
        let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("JSON body") };
        Resp { status, headers, body }
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Resp {
        let url = format!("{}{}", self.base, path);
        self.call_with(method, &url, self.token.as_deref(), body).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call(Method::GET, path, None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.call(Method::POST, path, Some(body)).await
    }
    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.call(Method::PUT, path, Some(body)).await
    }
    pub async fn delete(&self, path: &str) -> Resp {
        self.call(Method::DELETE, path, None).await
    }

    /// Control-surface call.
    pub async fn control(&self, method: Method, path: &str, body: Option<Value>) -> Resp {
        let url = format!("{}{}", self.fake.control_url(), path);
        self.call_with(method, &url, None, body).await
    }

    /// Polls `GET /actions/{id}` until it is no longer running (deadline 10 s).
    pub async fn wait_action(&self, id: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = self.get(&format!("/actions/{id}")).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            if r.body["action"]["status"] != "running" {
                return r.body["action"].clone();
            }
            assert!(Instant::now() < deadline, "action {id} did not finish");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
