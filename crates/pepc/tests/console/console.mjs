// Drives the node's web console in headless Chromium: the page loads against the
// running node, shows the UE and eNB counts the node has, a subscriber is added
// through its form, and a UE is looked up. Prints what it saw as JSON.
// node console.mjs URL EXPECTED_UES NEW_IMSI K OPC KNOWN_IMSI
import { chromium } from "playwright-core";

const [url, ues, imsi, k, opc, known] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--headless=new"],
});
const out = { errors: [] };
try {
  const page = await browser.newPage();
  page.on("pageerror", (e) => out.errors.push(String(e)));
  page.on("requestfailed", (r) => out.errors.push("request failed: " + r.url()));
  await page.goto(url);
  await page.waitForFunction((n) => document.getElementById("ue-count").textContent === n, ues, { timeout: 15000 });
  out.ue_count = await page.textContent("#ue-count");
  out.enb_count = await page.textContent("#enb-count");
  out.node = await page.textContent("#node");
  out.slices_rows = await page.locator("#slices tbody tr").count();
  await page.fill("#sub-imsi", imsi);
  await page.fill("#sub-k", k);
  await page.fill("#sub-opc", opc);
  await page.click("#sub-add");
  await page.waitForFunction(() => document.getElementById("sub-status").textContent !== "", null, { timeout: 15000 });
  out.sub_status = await page.textContent("#sub-status");
  await page.waitForFunction((i) => document.querySelector("#sub-list tbody").textContent.includes(i), imsi, { timeout: 15000 });
  out.sub_listed = true;
  await page.fill("#ue-search", known);
  await page.click("#ue-search-go");
  await page.waitForFunction(() => document.getElementById("ue-detail").textContent.includes("IMSI"), null, { timeout: 15000 });
  out.ue_detail = await page.textContent("#ue-detail");
} catch (e) {
  out.errors.push(String(e));
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
