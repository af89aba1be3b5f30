//! Sweeps reproducing the PEPC paper's data-plane figures, each written as CSV, JSON
//! and a PNG plot under the output directory.

use crate::dataplane::{run as run_one, DataplaneOpts, DataplaneResult, Design};
use pepc_ratelog::errln;
use plotters::prelude::*;
use std::path::Path;

struct Series {
    name: String,
    points: Vec<(f64, DataplaneResult)>,
}

/// A plotted line: (x, Mpps per data core) points.
struct Line {
    name: String,
    points: Vec<(f64, f64)>,
}

/// Figure "io": Mpps per data core against users for each node I/O backend on veth
/// (median of 3 runs per point), from `pepc bench io`; the UDP backend twice: against
/// the AF_XDP generator (one datagram per packet each way) and against the generator
/// on sockets (GSO sends, received with GRO).
fn io_sweep(seconds: f64, out: &Path, sd: u32) -> Result<(), String> {
    use crate::io::{run as run_io, Backend, GenIo, IoOpts, Mix};
    let mut lines = Vec::new();
    let mut json = Vec::new();
    let mut csv = String::from("series,backend,users,run,mpps_per_core,mpps_wall,loss,latency_us_p50,latency_us_p99,node_data_cpu_ns_per_packet,node_data_kernel_share\n");
    for (backend, gen_io, name) in [
        (
            Backend::Afxdp,
            GenIo::Afxdp,
            "AF_XDP (copy mode, native XDP)",
        ),
        (
            Backend::Udp,
            GenIo::Afxdp,
            "kernel UDP sockets (mmsg, GSO; SGi as UDP sink)",
        ),
        (
            Backend::Udp,
            GenIo::Sockets,
            "kernel UDP sockets, generator on sockets (GSO in, GRO; NAPI threads)",
        ),
        (Backend::Tun, GenIo::Afxdp, "kernel UDP socket (GSO) + TUN"),
    ] {
        let mut pts = Vec::new();
        for users in [10_000u32, 100_000, 1_000_000, 10_000_000] {
            let users = users / sd;
            let mut runs = Vec::new();
            for k in 0..3 {
                let r = run_io(&IoOpts {
                    backend,
                    users,
                    seconds,
                    rate_pps: 0,
                    mix: Mix::Table2,
                    seed: 42 + k,
                    xdp_mode: crate::io::XdpMode::Auto,
                    // The socket generator's receive runs in NAPI of its veth
                    // ends, which otherwise runs in the node's sending thread.
                    napi_threads: gen_io == GenIo::Sockets,
                    slices: 1,
                    rx: crate::io::RxMode::Demux,
                    steer: crate::io::Steer::Rss,
                    ring_size: 4096,
                    tun_queue_len: pepc_node::io::tun::DEFAULT_QUEUE_LEN,
                    gen_io,
                    node_gro: true,
                })?;
                errln!(
                    "  {backend:?} users={users} run {k}: {:.3} Mpps/core, loss {:.4}",
                    r.mpps_per_core,
                    r.loss
                );
                csv.push_str(&format!(
                    "{},{backend:?},{users},{k},{:.4},{:.4},{:.5},{},{},{:.0},{:.3}\n",
                    csv_field(name),
                    r.mpps_per_core,
                    r.mpps_wall,
                    r.loss,
                    r.latency_us_p50,
                    r.latency_us_p99,
                    r.node_data_cpu_ns_per_packet,
                    r.node_data_kernel_share
                ));
                runs.push(r.mpps_per_core);
                json.push(serde_json::json!({"series": name, "x": users, "run": k, "result": r}));
            }
            runs.sort_by(|a, b| a.total_cmp(b));
            pts.push((users as f64, runs[runs.len() / 2]));
        }
        lines.push(Line {
            name: name.into(),
            points: pts,
        });
    }
    let stem = out.join("figio");
    std::fs::write(stem.with_extension("csv"), csv).map_err(|e| e.to_string())?;
    std::fs::write(
        stem.with_extension("json"),
        serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    plot(
        &stem.with_extension("png"),
        "Data path on veth: node I/O backends vs users (Table 2 mix, median of 3)",
        "users",
        true,
        &lines,
    )
    .map_err(|e| format!("plot: {e}"))?;
    errln!("wrote {}.{{csv,json,png}}", stem.display());
    Ok(())
}

/// Run figure `fig`'s sweep.
pub fn run(fig: &str, seconds: f64, out: &Path, scale_down: u32) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let sd = scale_down.max(1);
    if fig == "io" {
        return io_sweep(seconds, out, sd);
    }
    let fig: u32 = fig
        .parse()
        .map_err(|_| format!("no sweep for figure {fig:?} (5, 6, 7, 12, 13, 14, 15, io)"))?;
    let base = DataplaneOpts {
        seconds,
        users: 1_000_000 / sd,
        ..Default::default()
    };
    let mut series = Vec::new();
    let (title, xlabel, logx) = match fig {
        5 => {
            let mut pts = Vec::new();
            for users in [10_000u32, 100_000, 1_000_000, 3_000_000, 10_000_000] {
                let o = DataplaneOpts {
                    users: users / sd,
                    signaling: 10_000,
                    ..base.clone()
                };
                pts.push((users as f64 / sd as f64, point(&o)?));
            }
            series.push(Series {
                name: "pepc (default)".into(),
                points: pts,
            });
            ("Fig. 5: data plane vs users (10K events/s)", "users", true)
        }
        6 => {
            // Signaling:data ratio, by varying the event rate at a fixed data load.
            for users in [1u32, 10_000, 1_000_000 / sd] {
                let mut pts = Vec::new();
                for rate in [0u64, 10_000, 100_000, 1_000_000] {
                    let o = DataplaneOpts {
                        users,
                        signaling: rate,
                        handover_share: 1.0,
                        ..base.clone()
                    };
                    let r = point(&o)?;
                    let ratio = if r.mpps_per_core > 0.0 {
                        r.signaling_achieved_per_s / (r.mpps_per_core * 1e6)
                    } else {
                        0.0
                    };
                    pts.push((ratio.max(1e-7), r));
                }
                series.push(Series {
                    name: format!("{users} users"),
                    points: pts,
                });
            }
            (
                "Fig. 6: data plane vs signaling:data ratio",
                "signaling events per data packet",
                true,
            )
        }
        7 => {
            let mut pts = Vec::new();
            for k in 1..=2usize {
                let o = DataplaneOpts {
                    data_cores: k,
                    ..base.clone()
                };
                pts.push((k as f64, point(&o)?));
            }
            series.push(Series {
                name: "1M users, 100K events/s".into(),
                points: pts,
            });
            (
                "Fig. 7: data plane vs data cores (this machine: 2 cores)",
                "data cores",
                false,
            )
        }
        12 => {
            for d in [
                Design::Default,
                Design::RwLock,
                Design::DatapathWriter,
                Design::GiantLock,
            ] {
                let mut pts = Vec::new();
                for rate in [10_000u64, 100_000, 1_000_000, 3_000_000] {
                    let o = DataplaneOpts {
                        design: d,
                        signaling: rate,
                        handover_share: 1.0,
                        ..base.clone()
                    };
                    pts.push((rate as f64, point(&o)?));
                }
                series.push(Series {
                    name: format!("{d:?}"),
                    points: pts,
                });
            }
            (
                "Fig. 12: shared-state designs vs state updates/s",
                "state updates per second",
                true,
            )
        }
        13 => {
            for d in [Design::Default, Design::Unbatched] {
                let mut pts = Vec::new();
                for rate in [10_000u64, 100_000, 1_000_000] {
                    let o = DataplaneOpts {
                        design: d,
                        signaling: rate,
                        handover_share: 0.0,
                        ..base.clone()
                    };
                    pts.push((rate as f64, point(&o)?));
                }
                series.push(Series {
                    name: format!("{d:?}"),
                    points: pts,
                });
            }
            (
                "Fig. 13: batched vs unbatched updates (attach/detach)",
                "attach+detach events per second",
                true,
            )
        }
        14 => {
            for (d, churn, name) in [
                (Design::OneTable, 0.0, "one table"),
                (Design::Default, 0.01, "two-level, 1% churn"),
                (Design::Default, 0.10, "two-level, 10% churn"),
            ] {
                let mut pts = Vec::new();
                for on in [0.01, 0.1, 0.5, 1.0] {
                    let o = DataplaneOpts {
                        design: d,
                        always_on: on,
                        churn_per_s: churn,
                        signaling: 0,
                        ..base.clone()
                    };
                    pts.push((on * 100.0, point(&o)?));
                }
                series.push(Series {
                    name: name.into(),
                    points: pts,
                });
            }
            (
                "Fig. 14: two-level vs one table (1M users)",
                "% always-on users",
                false,
            )
        }
        15 => {
            let mut pts = Vec::new();
            for share in [0.0, 0.05, 0.25, 0.5, 0.75, 1.0] {
                let o = DataplaneOpts {
                    users: 10_000_000 / sd,
                    iot_share: share,
                    signaling: 0,
                    ..base.clone()
                };
                pts.push((share * 100.0, point(&o)?));
            }
            series.push(Series {
                name: "stateless IoT customization".into(),
                points: pts,
            });
            (
                "Fig. 15: data plane vs share of stateless IoT devices (10M users)",
                "% stateless IoT devices",
                false,
            )
        }
        _ => {
            return Err(format!(
                "no sweep for figure {fig} (5, 6, 7, 12, 13, 14, 15, io)"
            ))
        }
    };
    write(out, fig, title, xlabel, logx, &series)
}

fn point(o: &DataplaneOpts) -> Result<DataplaneResult, String> {
    let r = run_one(o)?;
    errln!(
        "  {:?} users={} events/s={} cores={} iot={} on={} churn={}: {:.2} Mpps/core p99 {} ns",
        r.design,
        r.users,
        r.signaling_per_s,
        r.data_cores,
        r.iot_share,
        r.always_on,
        r.churn_per_s,
        r.mpps_per_core,
        r.latency_ns_p99
    );
    Ok(r)
}

/// A CSV field as RFC 4180 has it: quoted (quotes doubled) when it holds a comma, a
/// quote or a line break. Series names such as "two-level, 1% churn" do.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn write(
    out: &Path,
    fig: u32,
    title: &str,
    xlabel: &str,
    logx: bool,
    series: &[Series],
) -> Result<(), String> {
    let stem = out.join(format!("fig{fig}"));
    let mut csv = String::from("series,x,design,users,signaling_per_s,signaling_achieved_per_s,data_cores,mpps_per_core,mpps_wall_per_core,latency_ns_p50,latency_ns_p99,drops,iot_share,always_on,churn_per_s\n");
    let mut json = Vec::new();
    for s in series {
        for (x, r) in &s.points {
            csv.push_str(&format!(
                "{},{},{:?},{},{},{:.0},{},{:.4},{:.4},{},{},{},{},{},{}\n",
                csv_field(&s.name),
                x,
                r.design,
                r.users,
                r.signaling_per_s,
                r.signaling_achieved_per_s,
                r.data_cores,
                r.mpps_per_core,
                r.mpps_wall_per_core,
                r.latency_ns_p50,
                r.latency_ns_p99,
                r.drops,
                r.iot_share,
                r.always_on,
                r.churn_per_s
            ));
            json.push(serde_json::json!({"series": s.name, "x": x, "result": r}));
        }
    }
    std::fs::write(stem.with_extension("csv"), csv).map_err(|e| e.to_string())?;
    std::fs::write(
        stem.with_extension("json"),
        serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let lines: Vec<Line> = series
        .iter()
        .map(|s| Line {
            name: s.name.clone(),
            points: s
                .points
                .iter()
                .map(|(x, r)| (*x, r.mpps_per_core))
                .collect(),
        })
        .collect();
    plot(&stem.with_extension("png"), title, xlabel, logx, &lines)
        .map_err(|e| format!("plot: {e}"))?;
    errln!("wrote {}.{{csv,json,png}}", stem.display());
    Ok(())
}

fn plot(
    path: &Path,
    title: &str,
    xlabel: &str,
    logx: bool,
    series: &[Line],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (mut xmin, mut xmax) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let ymax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        * 1.15
        + 0.1;
    if xmin == xmax {
        xmin -= 1.0;
        xmax += 1.0;
    }
    let colors = [RED, BLUE, GREEN, MAGENTA, CYAN, BLACK];
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(xlabel)
                .x_label_formatter(&|x| axis_label(*x))
                .y_desc("Mpps per data core")
                .draw()?;
            for (i, s) in series.iter().enumerate() {
                let c = colors[i % colors.len()];
                let pts: Vec<(f64, f64)> = s.points.clone();
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                    .label(s.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c));
                chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }};
    }
    let caption = (title, ("sans-serif", 20));
    if logx {
        draw!(ChartBuilder::on(&root)
            .caption(caption.0, caption.1)
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d((xmin * 0.8..xmax * 1.25).log_scale(), 0.0..ymax)?);
    } else {
        let pad = (xmax - xmin) * 0.05;
        draw!(ChartBuilder::on(&root)
            .caption(caption.0, caption.1)
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(xmin - pad..xmax + pad, 0.0..ymax)?);
    }
    root.present()?;
    Ok(())
}

/// An x-axis value as a reader writes it: 10000 -> "10K", 1000000 -> "1M", 2.5 -> "2.5".
fn axis_label(x: f64) -> String {
    let short = |v: f64| {
        let r = (v * 10.0).round() / 10.0;
        if r.fract() == 0.0 {
            format!("{r:.0}")
        } else {
            format!("{r:.1}")
        }
    };
    let a = x.abs();
    if a >= 1e6 {
        format!("{}M", short(x / 1e6))
    } else if a >= 1e3 {
        format!("{}K", short(x / 1e3))
    } else {
        short(x)
    }
}

#[cfg(test)]
mod axis_tests {
    use super::{axis_label, csv_field};

    #[test]
    fn series_names_with_commas_stay_one_csv_field() {
        assert_eq!(csv_field("one table"), "one table");
        assert_eq!(csv_field("two-level, 1% churn"), "\"two-level, 1% churn\"");
        assert_eq!(csv_field("a \"b\""), "\"a \"\"b\"\"\"");
    }

    #[test]
    fn axis_labels_read_like_the_figures_users() {
        assert_eq!(axis_label(10_000.0), "10K");
        assert_eq!(axis_label(10_000_000.0), "10M");
        assert_eq!(axis_label(1_500_000.0), "1.5M");
        assert_eq!(axis_label(2.5), "2.5");
        assert_eq!(axis_label(0.0), "0");
        assert_eq!(axis_label(100.0), "100");
    }
}
