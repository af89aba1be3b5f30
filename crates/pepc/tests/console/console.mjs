// Drives the node's web console in headless Chromium while the emulator loads the
// node: the page loads (then prints "loaded", and the test starts the emulator), its
// charts fill with the attach storm and the traffic, a screenshot of the overview is
// taken under load, a UE's page is opened from the UE list and shows its bearers and
// counters, and a subscriber is added through the form. Prints what it saw as JSON on
// its last line.
// node console.mjs URL EXPECTED_UES NEW_IMSI K OPC KNOWN_IMSI SCREENSHOT_DIR
import { chromium } from "playwright-core";

const [url, ues, imsi, k, opc, known, shots] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--headless=new"],
});
const out = { errors: [] };
const wait = { timeout: 60000 };
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on("pageerror", (e) => out.errors.push(String(e)));
  page.on("requestfailed", (r) => out.errors.push("request failed: " + r.url()));
  // The missing UE looked up at the end is a 404, which Chromium logs as an error.
  page.on("console", (m) => {
    if (m.type() === "error" && !m.text().includes("status of 404")) out.errors.push("console: " + m.text());
  });
  await page.goto(url);
  await page.waitForFunction(() => window.pepc && window.pepc.polls >= 1, null, wait);
  console.log("loaded");

  // Under load: every UE attached, and the charts' last samples show traffic both
  // ways and connected UEs, with the attach storm in their history.
  await page.waitForFunction((n) => {
    const c = window.pepc.charts;
    if (document.getElementById("ue-count").textContent !== n) return false;
    const pps = c.pps.last();
    const some = (dir) => Object.entries(pps).some(([l, v]) => l.endsWith(dir) && v > 0);
    return some("uplink") && some("downlink") && c.ues.last().connected > 0
      && c.procedures.max()["attach/s"] > 0 && c.pps.data[0].length >= 8;
  }, ues, wait);
  out.charts = await page.evaluate(() => Object.fromEntries(Object.entries(window.pepc.charts).map(([name, c]) => [name, {
    labels: c.labels, samples: c.data[0].length, last: c.last(), max: c.max(),
    canvas: (() => { const cv = c.el.querySelector("canvas"); return cv ? [cv.width, cv.height] : null; })(),
  }])));
  out.ue_count = await page.textContent("#ue-count");
  out.ue_connected = await page.textContent("#ue-connected");
  out.enb_count = await page.textContent("#enb-count");
  out.node = await page.textContent("#node");
  out.slices_rows = await page.locator("#slices tbody tr").count();
  out.procedures = await page.textContent("#procedures tbody");
  out.overview_png = shots + "/overview.png";
  await page.screenshot({ path: out.overview_png, fullPage: true });

  // A subscriber added through the form.
  await page.fill("#sub-imsi", imsi);
  await page.fill("#sub-k", k);
  await page.fill("#sub-opc", opc);
  await page.click("#sub-add");
  await page.waitForFunction(() => document.getElementById("sub-status").textContent !== "", null, wait);
  out.sub_status = await page.textContent("#sub-status");
  await page.waitForFunction((i) => document.querySelector("#sub-list tbody").textContent.includes(i), imsi, wait);
  out.sub_listed = true;

  // A UE's page, from the UE list: its bearers with counters that move.
  await page.click(`#ues-list a[href="#ue/${known}"]`);
  await page.waitForFunction(() => {
    const u = window.pepc.ue;
    return u && u.bearers.length > 0 && u.bearers.every((b) => b.usage.ul_packets > 0 && b.usage.dl_packets > 0)
      && window.pepc.charts.ue && window.pepc.charts.ue.data[0].length >= 3;
  }, null, wait);
  out.ue_hash = await page.evaluate(() => location.hash);
  out.ue_overview_hidden = await page.evaluate(() => document.getElementById("overview").hidden);
  out.ue = await page.evaluate(() => window.pepc.ue);
  out.ue_title = await page.textContent("#ue-title");
  out.ue_summary = await page.textContent("#ue-summary");
  out.ue_bearer_rows = await page.$$eval("#ue-bearers tbody tr", (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  out.ue_chart = await page.evaluate(() => ({ last: window.pepc.charts.ue.last(), canvas: !!document.querySelector("#chart-ue canvas") }));
  out.ue_png = shots + "/ue.png";
  await page.screenshot({ path: out.ue_png, fullPage: true });

  // An IMSI searched that has no UE says so.
  await page.fill("#ue-search", "001010999999999");
  await page.click("#ue-search-go");
  await page.waitForFunction(() => document.getElementById("ue-detail").textContent.includes("no UE"), null, wait);
  out.ue_missing = await page.textContent("#ue-detail");
} catch (e) {
  out.errors.push(String(e));
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
