// The pepc console: polls the management API (/api/v1) once a second. No framework,
// no CDN: this file and index.html are embedded in the node's binary.
"use strict";
const api = "/api/v1";
let token = sessionStorage.getItem("pepc-token") || "";
let last = null; // { t, attaches, ul[], dl[] } of the previous poll

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

function cell(tr, text) {
  const td = document.createElement("td");
  td.textContent = text;
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

async function poll() {
  try {
    const [node, slices, enbs] = await Promise.all([call("GET", "/node"), call("GET", "/slices"), call("GET", "/enbs")]);
    document.getElementById("node").textContent =
      `version ${node.version}, up ${node.uptime_s} s, ${node.slices} slice(s); S1-U: ${node.io.s1u}; SGi: ${node.io.sgi}`;
    const now = performance.now() / 1000;
    const attaches = slices.reduce((a, s) => a + s.attaches, 0);
    const dt = last ? now - last.t : 0;
    document.getElementById("ue-count").textContent = slices.reduce((a, s) => a + s.ue_contexts, 0);
    document.getElementById("ue-connected").textContent = slices.reduce((a, s) => a + s.ue_connected, 0);
    document.getElementById("attach-rate").textContent = dt > 0 ? Math.round((attaches - last.attaches) / dt) : "–";
    document.getElementById("enb-count").textContent = enbs.length;
    rows(document.querySelector("#slices tbody"), slices, (tr, s) => {
      const pps = (now_v, prev) => (dt > 0 && prev !== undefined ? Math.round((now_v - prev) / dt) : "–");
      for (const v of [s.slice, s.ue_contexts, s.ue_connected, s.attaches,
                       pps(s.ul_forwarded, last && last.ul[s.slice]), pps(s.dl_forwarded, last && last.dl[s.slice]), s.drops]) {
        cell(tr, v);
      }
    });
    rows(document.querySelector("#enbs tbody"), enbs, (tr, e) => {
      for (const v of [e.association, e.plmn, `${e.enb_id} (${e.enb_id_kind})`, e.tais.map(t => t.tac).join(", "), e.ues_connected]) {
        cell(tr, v);
      }
    });
    last = { t: now, attaches, ul: slices.map(s => s.ul_forwarded), dl: slices.map(s => s.dl_forwarded) };
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = "API: " + e.message;
  }
}

async function subscribers() {
  try {
    const page = await call("GET", "/subscribers?limit=100");
    rows(document.querySelector("#sub-list tbody"), page.items, (tr, s) => {
      for (const v of [s.imsi, s.msisdn || "–", s.apn, s.qci, s.arp, s.sqn]) cell(tr, v);
      const b = document.createElement("button");
      b.textContent = "remove";
      b.onclick = async () => { await call("DELETE", "/subscribers/" + s.imsi); subscribers(); };
      cell(tr, "").appendChild(b);
    });
    document.getElementById("sub-total").textContent = `${page.total} subscriber(s)`;
  } catch (e) {
    document.getElementById("error").textContent = "API: " + e.message;
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

document.getElementById("ue-form").onsubmit = async (ev) => {
  ev.preventDefault();
  const out = document.getElementById("ue-detail");
  const imsi = document.getElementById("ue-search").value.trim();
  try {
    const u = await call("GET", "/ues/" + encodeURIComponent(imsi));
    const lines = [
      `IMSI ${u.imsi}  slice ${u.slice}  ${u.emm} / ECM-${u.ecm.toUpperCase()}  MME UE S1AP ID ${u.mme_ue_s1ap_id}`,
      `TAC ${u.tai.tac}  cell ${u.cell_id}  eNB ${u.enb ? u.enb.association + "/" + u.enb.enb_ue_s1ap_id : "–"}  procedure ${u.procedure}`,
      ...u.pdns.map(p => `PDN ${p.apn} ${p.address} (default EBI ${p.default_ebi})`),
      ...u.bearers.map(b => `bearer ${b.ebi} QCI ${b.qci} ARP ${b.arp} TEID-UL ${b.teid_ul} eNB TEID ${b.enb_teid}  UL ${b.usage.ul_bytes} B  DL ${b.usage.dl_bytes} B`),
    ];
    out.textContent = lines.join("\n");
  } catch (e) {
    out.textContent = e.message;
  }
};

poll();
subscribers();
setInterval(poll, 1000);
setInterval(subscribers, 5000);
