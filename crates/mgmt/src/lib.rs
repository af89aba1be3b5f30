//! The operator's interface of a running node over HTTP: the Prometheus endpoint
//! (`GET /metrics`, OpenMetrics text, which Prometheus scrapes natively) and the
//! management API (`/api/v1`, [`api`]).
//!
//! The server runs on a thread of its own (a single-threaded tokio runtime), never on
//! a slice's threads. What it exposes comes from a [`MetricsSource`] that reads, at
//! each scrape, counters their single writers publish (atomics of the data threads,
//! snapshots the control threads refresh): a scrape takes no lock on the data path.
#![forbid(unsafe_code)]

use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

pub mod api;

/// Label pairs of one sample.
pub type Labels = Vec<(String, String)>;

/// One scrape's samples, named `pepc_*`, with their help text.
#[derive(Default)]
pub struct Exposition {
    registry: Registry,
    counters: HashMap<&'static str, Family<Labels, Counter>>,
    gauges: HashMap<&'static str, Family<Labels, Gauge>>,
    histograms: HashMap<&'static str, Family<Labels, Buckets>>,
}

/// A histogram whose buckets were counted elsewhere (a control thread's fixed
/// buckets), encoded as an OpenMetrics histogram.
#[derive(Debug, Clone, Default)]
pub struct Buckets(Arc<std::sync::Mutex<HistogramState>>);

/// Sum, count, and (upper bound, count) per bucket.
type HistogramState = (f64, u64, Vec<(f64, u64)>);

impl prometheus_client::metrics::TypedMetric for Buckets {
    const TYPE: prometheus_client::metrics::MetricType =
        prometheus_client::metrics::MetricType::Histogram;
}

impl prometheus_client::encoding::EncodeMetric for Buckets {
    fn encode(
        &self,
        mut e: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        let g = self.0.lock().map_err(|_| std::fmt::Error)?;
        e.encode_histogram::<prometheus_client::encoding::NoLabelSet>(g.0, g.1, &g.2, None)
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Histogram
    }
}

/// A metric without labels is registered as such (no empty `{}` in the text).
fn plain<
    M: prometheus_client::metrics::TypedMetric
        + prometheus_client::encoding::EncodeMetric
        + Clone
        + Default
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
>(
    reg: &mut Registry,
    name: &'static str,
    help: &str,
) -> M {
    let m = M::default();
    reg.register(name, help, m.clone());
    m
}

fn labels(l: &[(&str, String)]) -> Labels {
    l.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

impl Exposition {
    /// A counter sample: exposed as `name_total` (monotonic since the node started).
    /// Help texts end without a period (the encoder adds one).
    pub fn counter(&mut self, name: &'static str, help: &str, l: &[(&str, String)], v: u64) {
        if l.is_empty() {
            plain::<Counter>(&mut self.registry, name, help).inc_by(v);
            return;
        }
        let reg = &mut self.registry;
        let f = self.counters.entry(name).or_insert_with(|| {
            let f = Family::<Labels, Counter>::default();
            reg.register(name, help, f.clone());
            f
        });
        f.get_or_create(&labels(l)).inc_by(v);
    }

    /// A gauge sample (a level now).
    pub fn gauge(&mut self, name: &'static str, help: &str, l: &[(&str, String)], v: i64) {
        if l.is_empty() {
            plain::<Gauge>(&mut self.registry, name, help).set(v);
            return;
        }
        let reg = &mut self.registry;
        let f = self.gauges.entry(name).or_insert_with(|| {
            let f = Family::<Labels, Gauge>::default();
            reg.register(name, help, f.clone());
            f
        });
        f.get_or_create(&labels(l)).set(v);
    }

    /// A histogram sample: `bounds` are the buckets' upper bounds and `counts` the
    /// observations in each (not cumulative), one more for above the last bound;
    /// `sum` in the unit of the bounds.
    pub fn histogram(
        &mut self,
        name: &'static str,
        help: &str,
        l: &[(&str, String)],
        bounds: &[f64],
        counts: &[u64],
        sum: f64,
    ) {
        let reg = &mut self.registry;
        let f = self.histograms.entry(name).or_insert_with(|| {
            let f = Family::<Labels, Buckets>::default();
            reg.register(name, help, f.clone());
            f
        });
        // The encoder takes each bucket's own count and accumulates them itself.
        let mut buckets: Vec<(f64, u64)> =
            bounds.iter().copied().zip(counts.iter().copied()).collect();
        buckets.push((
            f64::INFINITY,
            counts.get(bounds.len()).copied().unwrap_or(0),
        ));
        let total: u64 = counts.iter().sum();
        let m = f.get_or_create(&labels(l));
        if let Ok(mut g) = m.0.lock() {
            *g = (sum, total, buckets);
        };
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut s = String::with_capacity(8192);
        // Writing into a String cannot fail.
        let _ = encode(&mut s, &self.registry);
        s
    }
}

/// What a node exposes: filled in at each scrape.
pub trait MetricsSource: Send + Sync + 'static {
    fn collect(&self, out: &mut Exposition);
}

/// An HTTP server of the node on a thread of its own (single-threaded tokio runtime).
pub struct HttpServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// The metrics endpoint (a server with `GET /metrics`).
pub type MetricsServer = HttpServer;

async fn metrics(source: Arc<dyn MetricsSource>) -> impl IntoResponse {
    let mut e = Exposition::default();
    source.collect(&mut e);
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        e.render(),
    )
}

impl HttpServer {
    /// Listens on `listen` (port 0: any) and serves `GET /metrics` from `source`, on
    /// a thread named `thread`.
    pub fn start(
        listen: SocketAddr,
        source: Arc<dyn MetricsSource>,
        thread: &str,
    ) -> std::io::Result<Self> {
        let app = Router::new().route("/metrics", get(move || metrics(source.clone())));
        let s = Self::serve(listen, thread, app)?;
        tracing::info!("metrics: http://{}/metrics", s.addr);
        Ok(s)
    }

    /// Serves `app` on `listen`.
    pub fn serve(listen: SocketAddr, thread: &str, app: Router) -> std::io::Result<Self> {
        let std_listener = std::net::TcpListener::bind(listen)?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        let thread = std::thread::Builder::new()
            .name(thread.into())
            .spawn(move || {
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!("http {addr}: {e}");
                            return;
                        }
                    };
                    let served = axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = rx.await;
                        })
                        .await;
                    if let Err(e) = served {
                        tracing::error!("http {addr}: {e}");
                    }
                });
            })?;
        Ok(HttpServer {
            addr,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl MetricsSource for Fixed {
        fn collect(&self, out: &mut Exposition) {
            out.counter("pepc_attaches", "Attaches", &[("slice", "0".into())], 3);
            out.counter("pepc_attaches", "Attaches", &[("slice", "1".into())], 4);
            out.gauge("pepc_enbs", "eNBs set up", &[], 2);
        }
    }

    #[test]
    fn serves_the_text_exposition() {
        use std::io::{Read, Write};
        let s = MetricsServer::start("127.0.0.1:0".parse().unwrap(), Arc::new(Fixed), "m").unwrap();
        let mut c = std::net::TcpStream::connect(s.local_addr()).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut body = String::new();
        c.read_to_string(&mut body).unwrap();
        assert!(body.starts_with("HTTP/1.1 200"), "{body}");
        assert!(
            body.contains("pepc_attaches_total{slice=\"0\"} 3"),
            "{body}"
        );
        assert!(
            body.contains("pepc_attaches_total{slice=\"1\"} 4"),
            "{body}"
        );
        assert!(body.contains("pepc_enbs 2"), "{body}");
        assert!(body.contains("# HELP pepc_enbs eNBs set up"), "{body}");
    }
}
