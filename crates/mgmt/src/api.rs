//! The management API: JSON under `/api/v1`, described by the OpenAPI document at
//! `/api/v1/openapi.json` (kept in the repository: `crates/mgmt/openapi.json`).
//!
//! This module is the HTTP side only: bearer-token check, request and response
//! framing, JSON errors. What a request does is the node's [`ApiBackend`]; it reaches
//! state through its owners (the HSS, the threads' published figures), never by
//! locking a slice's UE state.
//!
//! Binding to a non-loopback address without a token is refused ([`check_listen`]);
//! with a token, every request must carry `Authorization: Bearer <token>`.

use crate::HttpServer;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;

pub use axum::http::Method;

/// The OpenAPI 3 document of `/api/v1`.
pub const OPENAPI: &str = include_str!("../openapi.json");

/// The web console (static; it holds no data, it calls the API like any client).
const CONSOLE_HTML: &str = include_str!("../console/index.html");
const CONSOLE_JS: &str = include_str!("../console/console.js");
/// The console's charts: uPlot (MIT), vendored as released (`console/vendor/README.md`
/// says which version and from where).
const UPLOT_JS: &str = include_str!("../console/vendor/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../console/vendor/uPlot.min.css");
const UPLOT_LICENSE: &str = include_str!("../console/vendor/uPlot.LICENSE");

/// The console's static files: path, content type, body.
const CONSOLE_FILES: [(&str, &str, &str); 5] = [
    ("/", "text/html; charset=utf-8", CONSOLE_HTML),
    ("/console.js", "text/javascript; charset=utf-8", CONSOLE_JS),
    (
        "/vendor/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        UPLOT_JS,
    ),
    (
        "/vendor/uPlot.min.css",
        "text/css; charset=utf-8",
        UPLOT_CSS,
    ),
    (
        "/vendor/uPlot.LICENSE",
        "text/plain; charset=utf-8",
        UPLOT_LICENSE,
    ),
];

/// The largest request body taken (a bulk CSV import of ~100K subscribers).
pub const MAX_BODY: usize = 16 << 20;

/// One API request: method, the path below `/api/v1`, the query string, the body.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub body: Bytes,
}

/// The answer: an HTTP status and a JSON body (`{"error": "..."}` for errors).
#[derive(Debug, Clone)]
pub struct ApiResponse {
    pub status: u16,
    pub body: serde_json::Value,
    /// The methods a resource takes (the `Allow` header of a 405, RFC 9110).
    pub allow: Option<&'static str>,
}

impl ApiResponse {
    pub fn ok(body: serde_json::Value) -> Self {
        ApiResponse {
            status: 200,
            body,
            allow: None,
        }
    }

    pub fn allow(mut self, methods: &'static str) -> Self {
        self.allow = Some(methods);
        self
    }

    /// An error whose message says what was wrong.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        ApiResponse {
            status,
            body: serde_json::json!({ "error": message.into() }),
            allow: None,
        }
    }
}

/// What the node does with API requests.
pub trait ApiBackend: Send + Sync + 'static {
    fn handle(&self, req: ApiRequest) -> ApiResponse;
}

/// The API's listening address is acceptable with this token: loopback always,
/// anything else only with a token (the node refuses to start otherwise).
pub fn check_listen(listen: SocketAddr, token: Option<&str>) -> Result<(), NeedsToken> {
    if listen.ip().is_loopback() || token.is_some_and(|t| !t.is_empty()) {
        Ok(())
    } else {
        Err(NeedsToken { listen })
    }
}

/// The API would listen on a non-loopback address without a bearer token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config key `api.token` is missing: the API listens on {listen}, not a loopback address, so every request must carry a bearer token")]
pub struct NeedsToken {
    pub listen: SocketAddr,
}

/// Why the API could not start.
#[derive(Debug, thiserror::Error)]
pub enum ApiStartError {
    #[error(transparent)]
    NeedsToken(#[from] NeedsToken),
    /// The address could not be listened on (taken, or not ours).
    #[error("config key `api.listen`: {listen}: {source}")]
    Listen {
        listen: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

struct Ctx {
    backend: Arc<dyn ApiBackend>,
    token: Option<String>,
}

fn json(status: u16, v: &serde_json::Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn authorized(ctx: &Ctx, headers: &HeaderMap) -> bool {
    let Some(want) = &ctx.token else {
        return true;
    };
    let got = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // RFC 7235 §2.1: the scheme is case-insensitive, then one or more spaces.
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim_start_matches(' '))
        .unwrap_or("");
    use subtle::ConstantTimeEq;
    got.len() == want.len() && bool::from(got.as_bytes().ct_eq(want.as_bytes()))
}

async fn dispatch(State(ctx): State<Arc<Ctx>>, req: Request) -> Response {
    if !authorized(&ctx, req.headers()) {
        return json(
            401,
            &serde_json::json!({"error": "missing or wrong bearer token (Authorization: Bearer <api.token>)"}),
        );
    }
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            return json(
                413,
                &serde_json::json!({"error": format!("request body refused: {e} (at most {MAX_BODY} bytes)")}),
            )
        }
    };
    let path = parts
        .uri
        .path()
        .strip_prefix("/api/v1")
        .unwrap_or("")
        .to_string();
    let r = ApiRequest {
        method: parts.method,
        path,
        query: parts.uri.query().unwrap_or("").to_string(),
        content_type: parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string(),
        body,
    };
    let backend = ctx.backend.clone();
    // The backend may write to the HSS database (a commit): off the runtime's thread.
    let a = tokio::task::spawn_blocking(move || backend.handle(r)).await;
    match a {
        Ok(a) => {
            let mut r = json(a.status, &a.body);
            if let Some(m) = a.allow {
                r.headers_mut()
                    .insert(header::ALLOW, axum::http::HeaderValue::from_static(m));
            }
            r
        }
        Err(e) => json(
            500,
            &serde_json::json!({"error": format!("request failed: {e}")}),
        ),
    }
}

async fn openapi(State(ctx): State<Arc<Ctx>>, headers: HeaderMap) -> Response {
    if !authorized(&ctx, &headers) {
        return json(
            401,
            &serde_json::json!({"error": "missing or wrong bearer token (Authorization: Bearer <api.token>)"}),
        );
    }
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// Starts the API on `listen`. Refuses a non-loopback address without a token.
pub fn start(
    listen: SocketAddr,
    token: Option<String>,
    backend: Arc<dyn ApiBackend>,
    thread: &str,
) -> Result<HttpServer, ApiStartError> {
    check_listen(listen, token.as_deref())?;
    let ctx = Arc::new(Ctx {
        backend,
        token: token.filter(|t| !t.is_empty()),
    });
    let mut app = Router::new();
    for (path, kind, body) in CONSOLE_FILES {
        app = app.route(
            path,
            get(move || async move { ([(header::CONTENT_TYPE, kind)], body) }),
        );
    }
    let app = app
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/{*rest}", any(dispatch))
        .fallback(|| async {
            json(
                404,
                &serde_json::json!({"error": "no such resource: the API is under /api/v1 (see /api/v1/openapi.json)"}),
            )
        })
        .with_state(ctx);
    let s = HttpServer::serve(listen, thread, app)
        .map_err(|source| ApiStartError::Listen { listen, source })?;
    tracing::info!(
        "management API: http://{0}/api/v1, console: http://{0}/",
        s.local_addr()
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nothing;
    impl ApiBackend for Nothing {
        fn handle(&self, _: ApiRequest) -> ApiResponse {
            ApiResponse::error(404, "nothing here")
        }
    }

    fn get(addr: SocketAddr, path: &str) -> (String, String) {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        write!(
            c,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut r = String::new();
        c.read_to_string(&mut r).unwrap();
        let (head, body) = r.split_once("\r\n\r\n").unwrap();
        (head.to_string(), body.to_string())
    }

    #[test]
    fn serves_the_console_and_its_chart_library_from_the_binary() {
        let s = start("127.0.0.1:0".parse().unwrap(), None, Arc::new(Nothing), "t").unwrap();
        let a = s.local_addr();
        let (head, page) = get(a, "/");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("text/html"), "{head}");
        // Everything the page loads comes from the node: no CDN.
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "{page}"
        );
        for (path, kind) in [
            ("/console.js", "text/javascript"),
            ("/vendor/uPlot.iife.min.js", "text/javascript"),
            ("/vendor/uPlot.min.css", "text/css"),
            ("/vendor/uPlot.LICENSE", "text/plain"),
        ] {
            assert!(page.contains(path.trim_start_matches('/')) || path.ends_with("LICENSE"));
            let (head, body) = get(a, path);
            assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
            assert!(head.contains(kind), "{path}: {head}");
            assert!(!body.is_empty(), "{path}");
        }
        assert!(get(a, "/vendor/uPlot.iife.min.js").1.contains("uPlot"));
        assert!(get(a, "/vendor/uPlot.LICENSE").1.contains("MIT"));
    }
}
