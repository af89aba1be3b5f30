// The pepc console: polls the management API (/api/v1) once a second and draws what
// it reads. No framework, no CDN: this file, index.html and the chart library (uPlot,
// vendor/) are embedded in the node's binary and served by it.
//
// The charts' history is kept here, in the page: a ring of the last 5 minutes of
// samples (one per poll), rates computed from the API's counters between two polls.
// A page opened later starts with an empty history.
"use strict";
const api = "/api/v1";
const HISTORY = 300; // samples: 5 minutes at one poll a second
let token = sessionStorage.getItem("pepc-token") || "";
let last = null; // the previous poll: { t, attaches, ok, failed, ul[], dl[], drops }

async function call(method, path, body, type) {
  const headers = {};
  if (token) headers["Authorization"] = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = type || "application/json";
  const r = await fetch(api + path, { method, headers, body });
  if (r.status === 401) {
    token = prompt("API token") || "";
    sessionStorage.setItem("pepc-token", token);
    throw new Error("token needed");
  }
  const v = await r.json();
  if (!r.ok) throw new Error(v.error || r.status);
  return v;
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function rows(tbody, items, f) {
  tbody.replaceChildren();
  for (const it of items) {
    const tr = document.createElement("tr");
    f(tr, it);
    tbody.appendChild(tr);
  }
}

const sum = (xs, f) => xs.reduce((a, x) => a + f(x), 0);
const fmt = (v) => (v === null || v === undefined ? "–" : Math.round(v).toLocaleString("en"));
// An axis tick: 1.5k, 20, 0.5.
const tick = (v) => (Math.abs(v) >= 1000 ? +(v / 1000).toFixed(1) + "k" : String(+v.toFixed(2)));
const set = (id, v) => { document.getElementById(id).textContent = v; };

// ---- charts ---------------------------------------------------------------------

const palette = {
  blue: "#2563eb", green: "#16a34a", red: "#dc2626", amber: "#d97706", grey: "#6b7280",
  ul: ["#2563eb", "#7c3aed", "#0891b2", "#4f46e5"],
  dl: ["#16a34a", "#65a30d", "#0d9488", "#ca8a04"],
};

// A chart: its series' labels, its data (uPlot's columns: times, then one per series)
// kept to the last HISTORY samples, and the uPlot drawing them.
class Chart {
  constructor(el, series, yLabel) {
    this.el = document.getElementById(el);
    this.labels = series.map((s) => s.label);
    this.data = [[], ...series.map(() => [])];
    this.plot = new uPlot({
      width: this.width(),
      height: 220,
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
      series: [{}, ...series.map((s) => ({
        label: s.label, stroke: s.color, width: 2, fill: s.fill ? s.color + "22" : undefined,
        value: (u, v) => fmt(v), points: { show: false },
      }))],
      axes: [{}, { label: yLabel, size: 60, values: (u, ticks) => ticks.map(tick) }],
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
    }, this.data, this.el);
  }

  width() {
    return Math.max(300, this.el.clientWidth || this.el.parentElement.clientWidth - 20);
  }

  // One sample: the time (seconds) and a value per series (null: no value then).
  push(t, values) {
    this.data[0].push(t);
    values.forEach((v, i) => this.data[i + 1].push(v));
    if (this.data[0].length > HISTORY) for (const col of this.data) col.shift();
    if (!this.el.closest("[hidden]")) this.plot.setData(this.data);
  }

  // The series' last values, and their largest over the history, by label.
  last() { return Object.fromEntries(this.labels.map((l, i) => [l, this.data[i + 1].at(-1) ?? null])); }
  max() { return Object.fromEntries(this.labels.map((l, i) => [l, Math.max(0, ...this.data[i + 1].filter((v) => v !== null))])); }

  resize() { this.plot.setSize({ width: this.width(), height: 220 }); this.plot.setData(this.data); }
}

// What the page shows, for a person (the charts) and for a test (this object).
const pepc = (window.pepc = { charts: {}, polls: 0 });

function charts(slices) {
  if (pepc.charts.procedures) return;
  pepc.charts.procedures = new Chart("chart-procedures", [
    { label: "attach/s", color: palette.blue, fill: true },
    { label: "succeeded/s", color: palette.green },
    { label: "failed/s", color: palette.red },
  ], "per second");
  const pps = [];
  for (const s of slices) {
    pps.push({ label: `slice ${s.slice} uplink`, color: palette.ul[s.slice % palette.ul.length] });
    pps.push({ label: `slice ${s.slice} downlink`, color: palette.dl[s.slice % palette.dl.length] });
  }
  pps.push({ label: "drops/s", color: palette.red });
  pepc.charts.pps = new Chart("chart-pps", pps, "packets/s");
  pepc.charts.ues = new Chart("chart-ues", [
    { label: "connected", color: palette.green, fill: true },
    { label: "idle", color: palette.amber },
    { label: "not registered", color: palette.grey },
  ], "UEs");
}

window.addEventListener("resize", () => {
  for (const c of Object.values(pepc.charts)) c.resize();
});

// ---- overview -------------------------------------------------------------------

async function poll() {
  try {
    const [node, slices, enbs] = await Promise.all([call("GET", "/node"), call("GET", "/slices"), call("GET", "/enbs")]);
    set("node", `pepc ${node.version}, up ${node.uptime_s} s, ${node.slices} slice(s); S1-U: ${node.io.s1u}; SGi: ${node.io.sgi}`);
    charts(slices);
    const now = performance.now() / 1000;
    const t = Date.now() / 1000;
    const procs = {};
    for (const s of slices) {
      for (const [name, p] of Object.entries(s.procedures || {})) {
        const q = (procs[name] ||= { started: 0, succeeded: 0, failed: 0 });
        q.started += p.started; q.succeeded += p.succeeded; q.failed += p.failed;
      }
    }
    const cur = {
      t: now,
      attaches: sum(slices, (s) => s.attaches),
      ok: sum(Object.values(procs), (p) => p.succeeded),
      failed: sum(Object.values(procs), (p) => p.failed),
      ul: Object.fromEntries(slices.map((s) => [s.slice, s.ul_forwarded])),
      dl: Object.fromEntries(slices.map((s) => [s.slice, s.dl_forwarded])),
      drops: sum(slices, (s) => s.drops),
    };
    const dt = last ? cur.t - last.t : 0;
    // A rate from two polls' counters (none on the first poll).
    const rate = (a, b) => (dt > 0 && b !== undefined ? Math.max(0, (a - b) / dt) : null);

    const contexts = sum(slices, (s) => s.ue_contexts);
    const registered = sum(slices, (s) => s.ue_registered);
    const connected = sum(slices, (s) => s.ue_connected);
    const idle = sum(slices, (s) => s.ue_idle);
    const attachRate = rate(cur.attaches, last && last.attaches);
    const ulRates = slices.map((s) => rate(cur.ul[s.slice], last && last.ul[s.slice]));
    const dlRates = slices.map((s) => rate(cur.dl[s.slice], last && last.dl[s.slice]));
    set("ue-count", contexts);
    set("ue-registered", registered);
    set("ue-connected", connected);
    set("ue-idle", idle);
    set("attach-rate", fmt(attachRate));
    set("pps", dt > 0 ? fmt(sum(ulRates, (v) => v || 0) + sum(dlRates, (v) => v || 0)) : "–");
    set("enb-count", enbs.length);

    if (dt > 0) {
      pepc.charts.procedures.push(t, [attachRate, rate(cur.ok, last.ok), rate(cur.failed, last.failed)]);
      const pps = [];
      slices.forEach((s, i) => pps.push(ulRates[i], dlRates[i]));
      pps.push(rate(cur.drops, last.drops));
      pepc.charts.pps.push(t, pps);
    }
    pepc.charts.ues.push(t, [connected, idle, Math.max(0, contexts - registered)]);

    rows(document.querySelector("#procedures tbody"), Object.entries(procs), (tr, [name, p]) => {
      cell(tr, name.replaceAll("_", " "));
      for (const v of [p.started, p.succeeded, p.failed]) cell(tr, fmt(v), "num");
    });
    rows(document.querySelector("#slices tbody"), slices, (tr, s) => {
      const i = slices.indexOf(s);
      cell(tr, s.slice);
      for (const v of [s.ue_contexts, s.ue_registered, s.ue_connected, s.ue_idle, s.attaches, ulRates[i], dlRates[i], s.drops]) {
        cell(tr, fmt(v), "num");
      }
    });
    rows(document.querySelector("#enbs tbody"), enbs, (tr, e) => {
      for (const v of [e.association, e.plmn, `${e.enb_id} (${e.enb_id_kind})`, e.tais.map((x) => x.tac).join(", ")]) cell(tr, v);
      cell(tr, e.ues_connected, "num");
    });
    last = cur;
    pepc.polls += 1;
    set("error", "");
  } catch (e) {
    set("error", "API: " + e.message);
  }
}

function ueLink(imsi) {
  const a = document.createElement("a");
  a.href = "#ue/" + imsi;
  a.textContent = imsi;
  return a;
}

async function ueList() {
  if (document.getElementById("overview").hidden) return;
  try {
    const page = await call("GET", "/ues?limit=20");
    rows(document.querySelector("#ues-list tbody"), page.items, (tr, u) => {
      cell(tr, "").appendChild(ueLink(u.imsi));
      for (const v of [u.slice, u.emm, u.ecm, u.pdns.map((p) => p.address).join(", ") || "–"]) cell(tr, v);
      cell(tr, u.bearers.length, "num");
    });
    set("ues-total", page.total > page.items.length ? `(first ${page.items.length} of ${page.total})` : `(${page.total})`);
  } catch (e) {
    set("error", "API: " + e.message);
  }
}

async function subscribers() {
  if (document.getElementById("overview").hidden) return;
  try {
    const page = await call("GET", "/subscribers?limit=100");
    rows(document.querySelector("#sub-list tbody"), page.items, (tr, s) => {
      for (const v of [s.imsi, s.msisdn || "–", s.apn, s.qci, s.arp, s.sqn]) cell(tr, v);
      const b = document.createElement("button");
      b.textContent = "remove";
      b.onclick = async () => { await call("DELETE", "/subscribers/" + s.imsi); subscribers(); };
      cell(tr, "").appendChild(b);
    });
    set("sub-total", `${page.total} subscriber(s)`);
  } catch (e) {
    set("error", "API: " + e.message);
  }
}

document.getElementById("sub-form").onsubmit = async (ev) => {
  ev.preventDefault();
  const status = document.getElementById("sub-status");
  const body = {
    imsi: document.getElementById("sub-imsi").value.trim(),
    k: document.getElementById("sub-k").value.trim(),
    opc: document.getElementById("sub-opc").value.trim(),
    apn: document.getElementById("sub-apn").value.trim() || "internet",
  };
  try {
    const s = await call("POST", "/subscribers", JSON.stringify(body));
    status.textContent = "added " + s.imsi;
    document.getElementById("sub-k").value = "";
    document.getElementById("sub-opc").value = "";
    subscribers();
  } catch (e) {
    status.textContent = "refused: " + e.message;
  }
};

// ---- the UE page (#ue/IMSI) -------------------------------------------------------

// The UE shown: its IMSI, the previous poll's byte counters, its throughput chart.
let ue = null;

function kv(dl, pairs) {
  dl.replaceChildren();
  for (const [k, v] of pairs) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    dl.append(dt, dd);
  }
}

async function showUe() {
  if (!ue) return;
  const imsi = ue.imsi;
  const detail = document.getElementById("ue-detail");
  try {
    const u = await call("GET", "/ues/" + encodeURIComponent(imsi));
    if (!ue || ue.imsi !== imsi) return;
    detail.textContent = "";
    document.getElementById("ue-body").hidden = false;
    set("ue-title", `UE ${u.imsi}`);
    kv(document.getElementById("ue-summary"), [
      ["IMSI", u.imsi], ["slice", u.slice], ["state", `${u.emm} / ECM-${u.ecm.toUpperCase()}`],
      ["procedure", u.procedure], ["MME UE S1AP ID", u.mme_ue_s1ap_id],
      ["eNB", u.enb ? `association ${u.enb.association}, eNB UE S1AP ID ${u.enb.enb_ue_s1ap_id}` : "–"],
      ["TAC", u.tai.tac], ["cell", u.cell_id], ["M-TMSI", u.m_tmsi],
      ["AMBR UL", fmt(u.ambr.ul) + " bit/s"], ["AMBR DL", fmt(u.ambr.dl) + " bit/s"],
    ]);
    rows(document.querySelector("#ue-pdns tbody"), u.pdns, (tr, p) => {
      for (const v of [p.apn, p.address, p.default_ebi]) cell(tr, v);
    });
    // A bearer's PDN: the one it is the default bearer of; a dedicated bearer's is
    // the UE's only PDN when it has one (the view does not link it otherwise).
    const pdnOf = (b) => u.pdns.find((p) => p.default_ebi === b.ebi) || (u.pdns.length === 1 ? u.pdns[0] : null);
    rows(document.querySelector("#ue-bearers tbody"), u.bearers, (tr, b) => {
      const p = pdnOf(b);
      const kind = u.pdns.some((x) => x.default_ebi === b.ebi) ? "default" : "dedicated";
      for (const v of [b.ebi, kind, p ? p.apn : "–", p ? p.address : "–", b.qci, b.arp, b.teid_ul, b.enb_teid, b.enb_address]) cell(tr, v);
      for (const v of [b.usage.ul_packets, b.usage.ul_bytes, b.usage.dl_packets, b.usage.dl_bytes]) cell(tr, fmt(v), "num");
    });
    const now = performance.now() / 1000;
    const ul = sum(u.bearers, (b) => b.usage.ul_bytes);
    const dl = sum(u.bearers, (b) => b.usage.dl_bytes);
    if (!ue.chart) {
      ue.chart = new Chart("chart-ue", [
        { label: "uplink B/s", color: palette.blue, fill: true },
        { label: "downlink B/s", color: palette.green, fill: true },
      ], "bytes/s");
      pepc.charts.ue = ue.chart;
    }
    if (ue.prev) {
      const dt = now - ue.prev.t;
      ue.chart.push(Date.now() / 1000, [Math.max(0, (ul - ue.prev.ul) / dt), Math.max(0, (dl - ue.prev.dl) / dt)]);
    }
    ue.prev = { t: now, ul, dl };
    pepc.ue = u;
  } catch (e) {
    if (!ue || ue.imsi !== imsi) return;
    document.getElementById("ue-body").hidden = true;
    detail.textContent = e.message;
  }
}

function route() {
  const m = location.hash.match(/^#ue(?:\/(\d{6,15}))?$/);
  const onUe = m !== null;
  document.getElementById("overview").hidden = onUe;
  document.getElementById("ue-page").hidden = !onUe;
  document.getElementById("nav-overview").classList.toggle("here", !onUe);
  document.getElementById("nav-ue").classList.toggle("here", onUe);
  const imsi = m && m[1];
  if (!imsi || (ue && ue.imsi !== imsi)) {
    // A new UE: its own chart and history.
    document.getElementById("chart-ue").replaceChildren();
    delete pepc.charts.ue;
    delete pepc.ue;
    ue = null;
    document.getElementById("ue-body").hidden = true;
    set("ue-detail", onUe ? "an IMSI shows that UE: its state, PDN connections, bearers and counters" : "");
  }
  if (imsi) {
    document.getElementById("ue-search").value = imsi;
    ue ||= { imsi };
    showUe();
  } else if (!onUe) {
    // Back on the overview: draw what was sampled while it was hidden.
    for (const c of Object.values(pepc.charts)) c.resize();
    ueList();
    subscribers();
  }
}

document.getElementById("ue-form").onsubmit = (ev) => {
  ev.preventDefault();
  const imsi = document.getElementById("ue-search").value.trim();
  if (/^\d{6,15}$/.test(imsi)) location.hash = "#ue/" + imsi;
  else set("ue-detail", `no UE with IMSI ${JSON.stringify(imsi)} (6-15 digits)`);
};

window.addEventListener("hashchange", route);
route();
poll();
setInterval(poll, 1000);
setInterval(showUe, 1000);
setInterval(ueList, 2000);
setInterval(subscribers, 5000);
