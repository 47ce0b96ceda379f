//! Request routing and the responses of the endpoints, as plain functions of the request line
//! and the registries (no I/O, no authentication; see `server` for those).

use bytes::Bytes;
use http::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE, HeaderValue, X_CONTENT_TYPE_OPTIONS};
use http::{Method, Response, StatusCode};
use http_body_util::Full;

use crate::health::{Health, Outcome, Probe};
use crate::metrics::{MetricsRegistry, OPENMETRICS_CONTENT_TYPE};

/// The response body type of every endpoint.
pub(crate) type Body = Full<Bytes>;

/// The path of the metrics endpoint.
pub const METRICS_PATH: &str = "/metrics";

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/<probe>`: every check of the probe.
    Probe(Probe),
    /// `/<probe>/<name>`: one check.
    ProbeCheck(Probe, String),
    /// `/metrics`.
    Metrics,
    /// Anything else.
    NotFound,
}

/// Map a request path to its [`Route`].
pub(crate) fn route(path: &str) -> Route {
    if path == METRICS_PATH {
        return Route::Metrics;
    }
    let Some(rest) = path.strip_prefix('/') else { return Route::NotFound };
    let (first, check) = match rest.split_once('/') {
        Some((first, check)) => (first, Some(check)),
        None => (rest, None),
    };
    let Some(probe) = Probe::from_name(first) else { return Route::NotFound };
    match check {
        None => Route::Probe(probe),
        Some(check) if !check.is_empty() && !check.contains('/') => Route::ProbeCheck(probe, percent_decode(check)),
        Some(_) => Route::NotFound,
    }
}

/// The response to `method` on `route` with `query` (the raw query string). Runs health checks
/// or encodes metrics; failed checks are logged with their real reasons at warn level.
pub(crate) fn respond(
    method: &Method,
    route: &Route,
    query: Option<&str>,
    health: &Health,
    metrics: &MetricsRegistry,
) -> Response<Body> {
    if *route == Route::NotFound {
        return not_found();
    }
    if method != Method::GET && method != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, format!("method {method} not allowed\n"));
        response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match route {
        Route::Probe(probe) => {
            let pairs = query_pairs(query.unwrap_or_default());
            let exclude: Vec<&str> =
                pairs.iter().filter(|(key, _)| key == "exclude").map(|(_, value)| value.as_str()).collect();
            let verbose = pairs.iter().any(|(key, _)| key == "verbose");
            let report = health.run(*probe, &exclude);
            if !report.passed() {
                tracing::warn!(probe = %probe, details = %report.failure_details(), "{probe} check failed");
            }
            text(report.status(), report.body(verbose))
        }
        Route::ProbeCheck(probe, name) => match health.run_one(*probe, name) {
            None => not_found(),
            Some(Outcome::Passed | Outcome::Excluded) => text(StatusCode::OK, "ok".to_owned()),
            Some(Outcome::Failed(reason)) => {
                tracing::warn!(probe = %probe, check = %name, %reason, "{probe} check {name} failed");
                text(StatusCode::INTERNAL_SERVER_ERROR, "internal server error: reason withheld\n".to_owned())
            }
        },
        Route::Metrics => match metrics.encode() {
            Ok(encoded) => {
                let mut response = text(StatusCode::OK, encoded);
                response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE));
                response
            }
            Err(error) => {
                tracing::warn!("{error}");
                text(StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n"))
            }
        },
        Route::NotFound => not_found(),
    }
}

/// `404 page not found`, like Go's mux.
pub(crate) fn not_found() -> Response<Body> {
    text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned())
}

/// A `text/plain` response with the headers every response carries.
pub(crate) fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    response
}

/// The decoded `key=value` pairs of a query string (`application/x-www-form-urlencoded`), in
/// order; a key without `=` has an empty value.
pub(crate) fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(&key.replace('+', " ")), percent_decode(&value.replace('+', " ")))
        })
        .collect()
}

/// Decode `%XX` escapes; invalid escapes stay as they are, invalid UTF-8 becomes U+FFFD.
fn percent_decode(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        let escaped = (byte == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(decoded) => {
                out.push(decoded);
                i += 3;
            }
            None => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    fn body(response: Response<Body>) -> String {
        // A `Full` body is complete from the start: one poll on a no-op waker yields it.
        let mut collect = std::pin::pin!(response.into_body().collect());
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        match collect.as_mut().poll(&mut context) {
            std::task::Poll::Ready(Ok(collected)) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
            std::task::Poll::Ready(Err(never)) => match never {},
            std::task::Poll::Pending => panic!("a Full body is always ready"),
        }
    }

    fn get(path_and_query: &str, health: &Health, metrics: &MetricsRegistry) -> (StatusCode, String) {
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_and_query, None),
        };
        let response = respond(&Method::GET, &route(path), query, health, metrics);
        (response.status(), body(response))
    }

    #[test]
    fn routes() {
        assert_eq!(route("/metrics"), Route::Metrics);
        assert_eq!(route("/healthz"), Route::Probe(Probe::Healthz));
        assert_eq!(route("/livez"), Route::Probe(Probe::Livez));
        assert_eq!(route("/readyz"), Route::Probe(Probe::Readyz));
        assert_eq!(route("/readyz/leaderElection"), Route::ProbeCheck(Probe::Readyz, "leaderElection".to_owned()));
        assert_eq!(route("/healthz/a%20b"), Route::ProbeCheck(Probe::Healthz, "a b".to_owned()));
        for path in ["/", "", "/healthz/", "/healthz/a/b", "/healthzz", "/metrics/", "/metricsx", "/debug/pprof"] {
            assert_eq!(route(path), Route::NotFound, "{path:?}");
        }
    }

    #[test]
    fn probe_responses_follow_the_health_report() {
        let health = Health::new();
        let metrics = MetricsRegistry::new();
        assert_eq!(get("/healthz", &health, &metrics), (StatusCode::OK, "ok".to_owned()));
        assert_eq!(
            get("/healthz?verbose", &health, &metrics),
            (StatusCode::OK, "[+]ping ok\nhealthz check passed\n".to_owned())
        );
        assert_eq!(get("/livez/ping", &health, &metrics), (StatusCode::OK, "ok".to_owned()));
        health.register("good", &[Probe::Readyz], || Ok(()));
        health.register("bad", &[Probe::Readyz], || Err("secret detail".to_owned()));
        let (status, text) = get("/readyz", &health, &metrics);
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(text, "[+]good ok\n[-]bad failed: reason withheld\nreadyz check failed\n");
        assert_eq!(
            get("/readyz?verbose=1&exclude=bad&exclude=nope", &health, &metrics),
            (
                StatusCode::OK,
                "[+]good ok\n[+]bad excluded: ok\nwarn: some health checks cannot be excluded: no matches for \
                 \"nope\"\nreadyz check passed\n"
                    .to_owned()
            )
        );
        assert_eq!(get("/readyz?exclude=bad", &health, &metrics), (StatusCode::OK, "ok".to_owned()));
        assert_eq!(get("/readyz/good", &health, &metrics), (StatusCode::OK, "ok".to_owned()));
        let (status, text) = get("/readyz/bad", &health, &metrics);
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!text.contains("secret"), "{text}");
        assert_eq!(get("/readyz/ping", &health, &metrics).0, StatusCode::NOT_FOUND);
        assert_eq!(get("/readyz/missing", &health, &metrics).0, StatusCode::NOT_FOUND);
    }

    #[test]
    fn metrics_have_the_openmetrics_content_type() {
        let metrics = MetricsRegistry::new();
        let response = respond(&Method::GET, &Route::Metrics, None, &Health::new(), &metrics);
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()),
            Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
        );
        assert_eq!(body(response), "# EOF\n");
    }

    #[test]
    fn other_methods_and_paths() {
        let health = Health::new();
        let metrics = MetricsRegistry::new();
        let response = respond(&Method::POST, &Route::Metrics, None, &health, &metrics);
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(response.headers().get(ALLOW).and_then(|v| v.to_str().ok()), Some("GET, HEAD"));
        assert_eq!(
            respond(&Method::HEAD, &Route::Probe(Probe::Healthz), None, &health, &metrics).status(),
            StatusCode::OK
        );
        let response = respond(&Method::DELETE, &Route::NotFound, None, &health, &metrics);
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(body(response), "404 page not found\n");
    }

    #[test]
    fn query_pairs_decode() {
        assert_eq!(
            query_pairs("exclude=a&&exclude=b%2Cc&verbose&x=1+2%zz"),
            vec![
                ("exclude".to_owned(), "a".to_owned()),
                ("exclude".to_owned(), "b,c".to_owned()),
                ("verbose".to_owned(), String::new()),
                ("x".to_owned(), "1 2%zz".to_owned()),
            ]
        );
        assert!(query_pairs("").is_empty());
    }
}
