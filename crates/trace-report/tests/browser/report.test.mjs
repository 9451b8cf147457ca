// The HTML report in a real browser (Debian's headless Chromium through playwright-core), run
// by .ci/browser-test with node's test runner. Inputs come from the environment:
//   CG_DEMO_REPORT      report of the demo trace
//   CG_DEMO_SUMMARY     `candle-graph summary --json` of the same trace (the analyser's figures)
//   CG_INJECTION_REPORT report of injection.jsonl (markup and control characters in every name)
//   CG_SCREENSHOT       where to save the screenshot of the demo report
//   CG_DIFF_REPORT      `candle-graph diff --html` of the demo against the retention fix
//   CG_DIFF_JSON        `candle-graph diff --json` of the same pair
//   CG_INJECTION_DIFF   `candle-graph diff --html` of injection.jsonl against itself
//   CG_SAMPLED_REPORT   report of a sampled trace (trace/12: frames, stacks, samples)
//   CG_INFERENCE_REPORT report of `demo --inference` (prefill, decode spans, the KV cache)
//   CG_RUN_REPORT       report of a run directory (`demo --every 2`: the run's story, step charts)
//   CG_FLAME_SCREENSHOT where to save the screenshot of its flame graph
//   CG_EXTRA_SAMPLED    optional: more sampled reports (colon-separated), checked the same way
//   CG_EXTRA_SHOTS      optional: with it, a screenshot of each of those (NAME-flame.png)
//   CG_PERF_REPORT      optional: a large report to time (prints its render time)
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";

const env = (name) => {
  const v = process.env[name];
  assert.ok(v, `${name} is not set`);
  return v;
};

let browser;
before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CG_CHROMIUM || "/usr/bin/chromium",
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
});
after(async () => { if (browser) await browser.close(); });

// Opens a file, collecting console errors, page errors, dialogs and network requests.
async function open(file, viewport = { width: 1280, height: 900 }) {
  const page = await browser.newPage({ viewport });
  const problems = { console: [], errors: [], dialogs: [], requests: [] };
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.console.push(m.text()); });
  page.on("pageerror", (e) => problems.errors.push(String(e)));
  page.on("dialog", async (d) => { problems.dialogs.push(d.message()); await d.dismiss(); });
  page.on("request", (r) => { if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) problems.requests.push(r.url()); });
  const url = pathToFileURL(file).href;
  const t0 = Date.now();
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("html[data-ready='1']", { timeout: 20000 });
  const loadMs = Date.now() - t0;
  return { page, problems, loadMs };
}

function clean(problems) {
  assert.deepEqual(problems.errors, [], "page errors");
  assert.deepEqual(problems.console, [], "console errors or warnings");
  assert.deepEqual(problems.dialogs, [], "dialogs");
  assert.deepEqual(problems.requests, [], "network requests");
}

test("the demo report renders, says the analyser's peak, and works by keyboard", async () => {
  const summary = JSON.parse(readFileSync(env("CG_DEMO_SUMMARY"), "utf8"));
  const peakBytes = summary.memory_peak.live_bytes;
  const { page, problems, loadMs } = await open(env("CG_DEMO_REPORT"));
  // the headline peak: the analyser's bytes, in the CLI's words
  const value = page.locator("[data-peak-bytes]").first();
  assert.equal(Number(await value.getAttribute("data-peak-bytes")), peakBytes);
  const text = await value.textContent();
  const cliText = readFileSync(env("CG_DEMO_SUMMARY_TEXT"), "utf8");
  const cliHeadline = cliText.split("\n").find((l) => l.startsWith("memory peak  ")).slice("memory peak  ".length);
  assert.equal(text, cliHeadline);
  // the chart's series keeps the exact peak
  assert.equal(Number(await page.locator(".chart").first().getAttribute("data-chart-max")), peakBytes);
  // jump to the peak: the live-set panel points at the peak's table
  await page.locator("button.jump").first().click();
  const panel = await page.locator("#liveset").textContent();
  assert.match(panel, /The peak of cpu: /);
  // keyboard: the chart takes focus and arrow keys move the cursor, Enter lists the live set
  await page.locator(".chart-area").first().focus();
  await page.keyboard.press("Home");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("Enter");
  assert.match(await page.locator("#liveset").textContent(), /Live on cpu after every event at or before|The peak of cpu/);
  assert.equal(await page.locator("#tooltip").isHidden(), false);
  // grouped by default: the groups with their counts are shown, the rows one by one are
  // collapsed after them and open on a click of their summary line
  const groups = page.locator("#held-0-by-span");
  assert.equal(await groups.isVisible(), true);
  assert.ok((await groups.locator("tbody tr").count()) >= 1);
  assert.ok(Number(await groups.locator("tbody tr td").nth(2).getAttribute("data-sort")) >= 1, "a group counts its storages");
  const held = page.locator("#held-0");
  const rows = page.locator("#held-0-rows");
  assert.equal(await rows.evaluate((d) => d.open), false, "the rows are collapsed by default");
  assert.equal(await held.isVisible(), false);
  assert.match(await rows.locator("summary").textContent(), /^One row per storage: .* rows, identical storages merged/);
  await rows.locator("summary").click();
  assert.equal(await rows.evaluate((d) => d.open), true);
  assert.equal(await held.isVisible(), true);
  // sortable tables: sort the held table by bytes, ascending
  await held.locator("th button").first().click();
  await held.locator("th button").first().click();
  const first = Number(await held.locator("tbody tr td").first().getAttribute("data-sort"));
  const last = Number(await held.locator("tbody tr:last-child td").first().getAttribute("data-sort"));
  assert.ok(first <= last, `ascending sort: ${first} <= ${last}`);
  // the live-set panel's link to the peak's rows opens them
  await rows.evaluate((d) => { d.open = false; });
  await page.locator("button.jump").first().click();
  await page.locator("#liveset a").first().click();
  assert.equal(await rows.evaluate((d) => d.open), true, "the peak's link opens the rows");
  // icicles drew nodes
  assert.ok((await page.locator(".icicle.held .node").count()) > 1);
  assert.ok((await page.locator(".icicle.spans .node").count()) >= 4);
  // dark theme and a narrow window keep the page usable
  await page.locator("#theme").click();
  await page.locator("#theme").click();
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "dark");
  await page.setViewportSize({ width: 380, height: 800 });
  await page.waitForTimeout(250);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `no horizontal scrolling of the page at 380 px (${overflow} px)`);
  clean(problems);
  // the screenshot: a fresh page at the memory chart, hovering the peak
  const shot = await open(env("CG_DEMO_REPORT"), { width: 1100, height: 760 });
  await shot.page.locator("#memory").scrollIntoViewIfNeeded();
  await shot.page.evaluate(() => window.scrollTo(0, document.getElementById("memory").offsetTop - 40));
  const line = await shot.page.locator(".peakline").first().boundingBox();
  await shot.page.mouse.move(line.x + line.width + 1, line.y + line.height * 0.6);
  await shot.page.waitForTimeout(100);
  await shot.page.screenshot({ path: env("CG_SCREENSHOT") });
  clean(shot.problems);
  console.log(`demo report: ready in ${loadMs} ms (script ${await page.evaluate(() => document.documentElement.dataset.renderMs)} ms after navigation start)`);
});

test("the first screen answers: the peak, what held it, the finding that lowers it most with its saving", async () => {
  const summary = JSON.parse(readFileSync(env("CG_DEMO_SUMMARY"), "utf8"));
  const peakBytes = summary.memory_peak.live_bytes;
  const { page, problems } = await open(env("CG_DEMO_REPORT"), { width: 1280, height: 900 });
  const onFirstScreen = async (sel) => {
    const box = await page.locator(sel).first().boundingBox();
    assert.ok(box, `${sel} is shown`);
    assert.ok(box.y + box.height <= 900, `${sel} is on the first screen (bottom at ${box.y + box.height} px)`);
  };
  await onFirstScreen("[data-peak-bytes]");
  await onFirstScreen("[data-held-by]");
  await onFirstScreen("[data-finding]");
  // what held it: the largest category, in bytes as the CLI prints them
  const held = await page.locator("[data-held-by]").first().textContent();
  assert.match(held, new RegExp("^" + summary.answer.held_by[0].category + " "));
  // the top finding with its replayed saving: the summary's first what-if, word for word
  const top = summary.answer.lower_the_peak[0];
  const finding = page.locator("[data-finding]").first();
  assert.equal(await finding.getAttribute("data-finding"), top.code);
  assert.ok((await finding.textContent()).startsWith(top.text), await finding.textContent());
  assert.match(top.text, /the run's peak .* → .*%/);
  // the JSON carries the what-if on the finding itself
  const f = summary.findings.find((x) => x.code === top.code);
  assert.ok(f.what_if && typeof f.what_if.run_peak_bytes === "number" && typeof f.what_if.exact === "boolean");
  assert.ok(Array.isArray(f.what_if.pass_peaks) && f.what_if.pass_peaks.length > 0);
  // no coverage gap is repeated as a finding
  assert.ok(!summary.findings.some((x) => x.code === "coverage_gap"));
  clean(problems);
});

test("the memory chart: logical y-scale, hover on the peak reads the peak, wheel/brush zoom, Escape and the button reset", async () => {
  const summary = JSON.parse(readFileSync(env("CG_DEMO_SUMMARY"), "utf8"));
  const peakBytes = summary.memory_peak.live_bytes;
  const { page, problems } = await open(env("CG_DEMO_REPORT"), { width: 1280, height: 900 });
  const chart = page.locator(".chart").first();
  // the logical stack sets the y-scale (8% headroom), whatever the physical samples read
  const yMax = Number(await chart.getAttribute("data-y-max"));
  assert.ok(Math.abs(yMax - peakBytes * 1.08) <= 1, `y max ${yMax} vs peak ${peakBytes}`);
  await page.locator("#memory").scrollIntoViewIfNeeded();
  // the peak label is inside the plot
  const area = await page.locator(".chart-area").first().boundingBox();
  const label = await page.locator(".peaklabel").first().boundingBox();
  assert.ok(label.x >= area.x && label.x + label.width <= area.x + area.width + 0.5, "peak label inside the plot");
  // hovering exactly on the peak line reads the peak
  const line = await page.locator(".peakline").first().boundingBox();
  await page.mouse.move(line.x + line.width / 2, line.y + line.height * 0.5);
  await page.waitForTimeout(50);
  const tip = await page.locator("#tooltip").textContent();
  assert.match(tip, /the peak: /, tip);
  // the x-axis starts at the measured region's start
  const firstX = await page.locator(".chart-area svg text.xlab").first().textContent();
  assert.match(firstX, /^0(\.0+)? ?(ns|µs|ms|s)$|^0$/, firstX);
  // a plain wheel scrolls the page (no zoom, a hint says how); ctrl + wheel zooms; Escape resets
  await page.mouse.move(area.x + area.width / 2, area.y + area.height / 2);
  await page.mouse.wheel(0, -300);
  await page.waitForTimeout(50);
  assert.equal(await chart.getAttribute("data-zoomed"), "false", "a plain wheel does not zoom");
  assert.match(await page.locator(".chart-zoom-hint").first().textContent(), /ctrl \+ wheel/);
  // ctrl + wheel (a trackpad pinch arrives so) zooms
  await page.evaluate(([x, y]) => document.querySelector(".chart-area").dispatchEvent(new WheelEvent("wheel",
    { deltaY: -300, ctrlKey: true, clientX: x, clientY: y, bubbles: true, cancelable: true })), [area.x + area.width / 2, area.y + area.height / 2]);
  await page.waitForTimeout(50);
  assert.equal(await chart.getAttribute("data-zoomed"), "true", "ctrl + wheel zooms");
  await page.locator(".chart-area").first().focus();
  await page.keyboard.press("Escape");
  assert.equal(await chart.getAttribute("data-zoomed"), "false");
  // after a click on the chart a plain wheel zooms
  // (the plain wheel above scrolled the page: the chart's box is read again)
  const moved = await page.locator(".chart-area").first().boundingBox();
  await page.mouse.click(moved.x + moved.width / 2, moved.y + moved.height / 2);
  assert.equal(await page.evaluate(() => document.activeElement.classList.contains("chart-area")), true, "a click focuses the chart");
  await page.mouse.wheel(0, -300);
  await page.waitForTimeout(50);
  assert.equal(await chart.getAttribute("data-zoomed"), "true", "a wheel after a click zooms");
  await page.locator(".chart-area").first().focus();
  await page.keyboard.press("Escape");
  assert.equal(await chart.getAttribute("data-zoomed"), "false");
  // a brush (drag) zooms, the button resets
  const at = await page.locator(".chart-area").first().boundingBox();
  await page.mouse.move(at.x + at.width * 0.3, at.y + at.height / 2);
  await page.mouse.down();
  await page.mouse.move(at.x + at.width * 0.6, at.y + at.height / 2, { steps: 5 });
  await page.mouse.up();
  assert.equal(await chart.getAttribute("data-zoomed"), "true");
  await page.locator("button.reset").first().click();
  assert.equal(await chart.getAttribute("data-zoomed"), "false");
  // the zoom buttons
  await page.locator("button.chart-zoom[data-zoom='in']").first().click();
  assert.equal(await chart.getAttribute("data-zoomed"), "true");
  await page.locator("button.chart-zoom[data-zoom='out']").first().click();
  assert.equal(await chart.getAttribute("data-zoomed"), "false");
  clean(problems);
});

// The stacked areas' outlines: along the top edge x never decreases, along the bottom edge
// (walked back) x never increases, and each layer closes where it started (no slant, no
// diagonal). Checked on the whole timeline and after "Jump to peak".
async function polygonsMonotone(page) {
  return page.evaluate(() => [...document.querySelectorAll(".chart-area path[class^='cat']")].map((p) => {
    const pts = p.getAttribute("d").replace(/^M/, "").replace(/Z$/, "").split("L").map((q) => q.split(",").map(Number));
    const half = pts.length / 2, bad = [];
    for (let i = 1; i < half; i++) if (pts[i][0] < pts[i - 1][0] - 0.05) bad.push(["top", i]);
    for (let i = half + 1; i < pts.length; i++) if (pts[i][0] > pts[i - 1][0] + 0.05) bad.push(["bottom", i]);
    // vertical or horizontal moves only: every segment keeps x or y
    for (let i = 1; i < pts.length; i++) {
      const [a, b] = [pts[i - 1], pts[i]];
      if (Math.abs(a[0] - b[0]) > 0.05 && Math.abs(a[1] - b[1]) > 0.05) bad.push(["slant", i]);
    }
    if (Math.abs(pts[0][0] - pts[pts.length - 1][0]) > 0.05) bad.push(["open", 0]);
    return { cls: p.getAttribute("class"), n: pts.length, even: pts.length % 2 === 0, bad };
  }));
}

for (const [label, viewport] of [["1280", { width: 1280, height: 800 }], ["390", { width: 390, height: 844 }]]) {
  test(`the memory chart at ${label} px: outlines monotone, labels inside, jump stays in the data, tooltip on screen`, async () => {
    for (const file of [env("CG_DEMO_REPORT"), env("CG_SAMPLED_REPORT"), env("CG_INFERENCE_REPORT")]) {
      const { page, problems } = await open(file, viewport);
      const chart = page.locator(".chart").first();
      if (!(await chart.count())) { await page.close(); continue; }
      await page.locator(".chart-area").first().scrollIntoViewIfNeeded();
      const check = async (when) => {
        const polys = await polygonsMonotone(page);
        assert.ok(polys.length >= 1, `${when}: a stacked layer`);
        for (const p of polys) {
          assert.ok(p.even, `${when} ${p.cls}: top and bottom edges pair up`);
          assert.deepEqual(p.bad, [], `${when} ${p.cls}: outline walked in order`);
        }
        // every label's box inside the chart's svg (none cut at either side)
        const cut = await page.evaluate(() => {
          const svg = document.querySelector(".chart-area svg").getBoundingClientRect();
          return [...document.querySelectorAll(".chart-area svg text")].map((t) => [t.textContent, t.getBoundingClientRect()])
            .filter(([, r]) => r.left < svg.left - 0.5 || r.right > svg.right + 0.5 || r.top < svg.top - 0.5 || r.bottom > svg.bottom + 0.5)
            .map(([t]) => t);
        });
        assert.deepEqual(cut, [], `${when}: labels inside the chart`);
      };
      await check("whole timeline");
      await page.locator("button.jump").first().click();
      await page.waitForTimeout(50);
      await check("after jump to peak");
      // the view after the jump lies inside the data: its last x label is not past the end
      const tip = await page.locator("#tooltip").boundingBox();
      const width = viewport.width;
      assert.ok(tip && tip.x >= 0 && tip.x + tip.width <= width + 0.5, `tooltip on screen (${JSON.stringify(tip)})`);
      const inner = await page.evaluate(() => {
        const t = document.querySelector("#tooltip"), tb = t.querySelector("table");
        return [t.getBoundingClientRect().right, tb ? tb.getBoundingClientRect().right : 0];
      });
      assert.ok(inner[1] <= inner[0] + 0.5, `the tooltip's table inside its box (${inner})`);
      const view = await page.evaluate(() => {
        const lab = [...document.querySelectorAll(".chart-area svg text.xlab")].map((t) => t.textContent);
        return lab;
      });
      assert.ok(view.length >= 2);
      clean(problems);
      await page.close();
    }
  });
}

// "Jump to peak" shows a window inside the data, whatever the peak's place, and a pinch zooms
// on a touch screen (two touch points through the DevTools protocol).
test("the memory chart: jump to peak stays inside the data, pinch and one-finger drag work", async () => {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true });
  const page = await context.newPage();
  await page.goto(pathToFileURL(env("CG_DEMO_REPORT")).href, { waitUntil: "load" });
  await page.waitForSelector("html[data-ready='1']");
  const chart = page.locator(".chart").first();
  const area = page.locator(".chart-area").first();
  await area.scrollIntoViewIfNeeded();
  const box = await area.boundingBox();
  const cdp = await context.newCDPSession(page);
  const touch = (type, pts) => cdp.send("Input.dispatchTouchEvent", {
    type, touchPoints: pts.map(([x, y], id) => ({ x, y, id })),
  });
  const y = box.y + box.height / 2, mid = box.x + box.width / 2;
  await touch("touchStart", [[mid - 20, y], [mid + 20, y]]);
  for (let d = 30; d <= 120; d += 30) await touch("touchMove", [[mid - d, y], [mid + d, y]]);
  await touch("touchEnd", []);
  await page.waitForTimeout(50);
  assert.equal(await chart.getAttribute("data-zoomed"), "true", "a pinch zooms in");
  const before = await page.locator(".chart-area svg text.xlab").first().textContent();
  await touch("touchStart", [[mid + 60, y]]);
  for (let d = 20; d <= 100; d += 20) await touch("touchMove", [[mid + 60 - d, y]]);
  await touch("touchEnd", []);
  await page.waitForTimeout(50);
  const after = await page.locator(".chart-area svg text.xlab").first().textContent();
  assert.notEqual(after, before, "a one-finger drag pans");
  // jump to the peak: the window lies inside the data (its first label ≥ the start)
  await page.locator("button.jump").first().click();
  const first = await page.locator(".chart-area svg text.xlab").first().textContent();
  assert.ok(!first.startsWith("-"), `the window starts inside the data (${first})`);
  await context.close();
});

// A run's step charts zoom as the memory chart does: a plain wheel scrolls the page (a hint says
// how to zoom), ctrl + wheel or a wheel after a click zooms, Escape and the button reset, and on
// a touch screen two fingers pinch and one pans.
test("the run page's step charts: a plain wheel scrolls, ctrl + wheel, a click, the buttons and a pinch zoom", async () => {
  const { page, problems } = await open(env("CG_RUN_REPORT"), { width: 1280, height: 900 });
  const figs = page.locator("figure.stepchart");
  assert.ok(await figs.count() >= 2, "a step chart per figure of the run");
  const fig = figs.first();
  const svg = fig.locator("svg");
  await svg.scrollIntoViewIfNeeded();
  const box = await svg.boundingBox();
  const viewBox = () => svg.getAttribute("viewBox");
  const whole = await viewBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, -300);
  await page.waitForTimeout(50);
  assert.equal(await fig.getAttribute("data-zoomed"), "false", "a plain wheel does not zoom");
  assert.equal(await viewBox(), whole);
  assert.match(await fig.locator(".chart-zoom-hint").textContent(), /ctrl \+ wheel/);
  await page.evaluate(([x, y]) => document.querySelector("figure.stepchart svg").dispatchEvent(new WheelEvent("wheel",
    { deltaY: -300, ctrlKey: true, clientX: x, clientY: y, bubbles: true, cancelable: true })), [box.x + box.width / 2, box.y + box.height / 2]);
  assert.equal(await fig.getAttribute("data-zoomed"), "true", "ctrl + wheel zooms");
  await svg.focus();
  await page.keyboard.press("Escape");
  assert.equal(await fig.getAttribute("data-zoomed"), "false");
  assert.equal(await viewBox(), whole);
  const at = await svg.boundingBox();
  await page.mouse.click(at.x + at.width / 2, at.y + at.height / 2);
  await page.mouse.wheel(0, -300);
  await page.waitForTimeout(50);
  assert.equal(await fig.getAttribute("data-zoomed"), "true", "a wheel after a click zooms");
  await fig.locator("button.step-reset").click();
  assert.equal(await fig.getAttribute("data-zoomed"), "false");
  await fig.locator("button.step-zoom[data-zoom='in']").click();
  assert.equal(await fig.getAttribute("data-zoomed"), "true");
  await fig.locator("button.step-zoom[data-zoom='out']").click();
  assert.equal(await fig.getAttribute("data-zoomed"), "false");
  clean(problems);

  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true });
  const phone = await context.newPage();
  await phone.goto(pathToFileURL(env("CG_RUN_REPORT")).href, { waitUntil: "load" });
  await phone.waitForSelector("html[data-ready='1']");
  const pfig = phone.locator("figure.stepchart").first();
  const psvg = pfig.locator("svg");
  await psvg.scrollIntoViewIfNeeded();
  const pb = await psvg.boundingBox();
  const cdp = await context.newCDPSession(phone);
  const touch = (type, pts) => cdp.send("Input.dispatchTouchEvent", {
    type, touchPoints: pts.map(([x, y], id) => ({ x, y, id })),
  });
  const y = pb.y + pb.height / 2, mid = pb.x + pb.width / 2;
  await touch("touchStart", [[mid - 20, y], [mid + 20, y]]);
  for (let d = 30; d <= 120; d += 30) await touch("touchMove", [[mid - d, y], [mid + d, y]]);
  await touch("touchEnd", []);
  await phone.waitForTimeout(50);
  assert.equal(await pfig.getAttribute("data-zoomed"), "true", "a pinch zooms in");
  const pinched = await psvg.getAttribute("viewBox");
  await touch("touchStart", [[mid + 60, y]]);
  for (let d = 20; d <= 100; d += 20) await touch("touchMove", [[mid + 60 - d, y]]);
  await touch("touchEnd", []);
  await phone.waitForTimeout(50);
  assert.notEqual(await psvg.getAttribute("viewBox"), pinched, "a one-finger drag pans");
  await context.close();
});

for (const [name, file] of [["report", "CG_DEMO_REPORT"], ["diff", "CG_DIFF_REPORT"], ["inference", "CG_INFERENCE_REPORT"], ["run", "CG_RUN_REPORT"]]) {
  test(`the ${name} page at 390 px: no sideways scroll, unique ids`, async () => {
    const { page, problems } = await open(env(file), { width: 390, height: 844 });
    await page.waitForTimeout(250);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 1, `no horizontal scrolling at 390 px (${overflow} px)`);
    const dup = await page.evaluate(() => {
      const seen = new Map();
      document.querySelectorAll("[id]").forEach((e) => seen.set(e.id, (seen.get(e.id) || 0) + 1));
      return [...seen].filter(([, n]) => n > 1).map(([id]) => id);
    });
    assert.deepEqual(dup, [], "duplicate ids");
    if (name === "report") assert.match(await page.locator("body").textContent(), /Open in Perfetto: `candle-graph export /);
    clean(problems);
  });
}

// Words of at most 12 letters split over two lines in the page's text (tables, facts,
// findings; every <details> opened first): a column squeezed below its words' width.
async function brokenWords(page) {
  return page.evaluate(() => {
    document.querySelectorAll("details").forEach((d) => { d.open = true; });
    const out = [];
    const walker = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    let n, checked = 0;
    while ((n = walker.nextNode()) && checked < 50000) {
      const host = n.parentElement;
      if (!host || host.closest("svg, pre, .icicle, .flame-area, #tooltip, .legend")) continue;
      const re = /\p{L}+/gu;
      let m;
      while ((m = re.exec(n.data))) {
        if (m[0].length < 2 || m[0].length > 12) continue;
        checked++;
        range.setStart(n, m.index);
        range.setEnd(n, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (tops.size > 1) out.push(`${m[0]} in ${host.tagName.toLowerCase()}${host.id ? "#" + host.id : ""}: ${n.data.slice(0, 60)}`);
      }
    }
    return out;
  });
}

for (const [label, viewport] of [["1280", { width: 1280, height: 800 }], ["390", { width: 390, height: 844 }]]) {
  for (const [name, file] of [["report", "CG_DEMO_REPORT"], ["diff", "CG_DIFF_REPORT"], ["sampled", "CG_SAMPLED_REPORT"], ["inference", "CG_INFERENCE_REPORT"], ["run", "CG_RUN_REPORT"]]) {
    test(`the ${name} page at ${label} px: tables keep every column on screen, no word broken inside`, async () => {
      const { page, problems } = await open(env(file), viewport);
      await page.waitForTimeout(200);
      // every table's cells lie inside the page's width: none clipped, none off screen
      const off = await page.evaluate((w) => {
        document.querySelectorAll("details").forEach((d) => { d.open = true; });
        const bad = [];
        document.querySelectorAll("table.sortable").forEach((t) => {
          const wrap = t.closest(".table-wrap");
          if (wrap && wrap.scrollWidth > wrap.clientWidth + 1) bad.push(`${t.id}: ${wrap.scrollWidth} px in ${wrap.clientWidth} px`);
          const first = t.tBodies[0] && t.tBodies[0].rows[0];
          if (!first) return;
          [...first.cells].forEach((c, i) => {
            const r = c.getBoundingClientRect();
            if (r.width > 0 && (r.left < -1 || r.right > w + 1)) bad.push(`${t.id} column ${i}: ${Math.round(r.left)}–${Math.round(r.right)} px`);
          });
        });
        return bad;
      }, viewport.width);
      assert.deepEqual(off, [], "table cells off screen or clipped");
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 1, `no horizontal scrolling (${overflow} px)`);
      assert.deepEqual(await brokenWords(page), [], "words of at most 12 letters broken over two lines");
      if (name === "diff") {
        // the overlay's axis labels are read at the page's size, not shrunk with the SVG
        const heights = await page.locator("figure.overlay .label").evaluateAll((ls) => ls.map((l) => l.getBoundingClientRect().height));
        assert.ok(heights.length >= 4 && heights.every((h) => h >= 12), `overlay labels ${heights}`);
      }
      if (name === "report" && label === "390") {
        // the first screen: the peak, what held it and the advice that lowers it most
        await page.evaluate(() => { document.querySelectorAll("details").forEach((d) => { d.open = false; }); window.scrollTo(0, 0); });
        const advice = await page.locator("[data-finding]").first().boundingBox();
        assert.ok(advice && advice.y + 20 < viewport.height, `the advice starts on the first screen (y = ${advice && advice.y})`);
        const nav = await page.locator("nav").boundingBox();
        assert.ok(nav.height < 48, `the sticky bar is one line (${nav.height} px)`);
      }
      clean(problems);
    });
  }
}

test("a trace full of markup and control characters runs nothing and shows it as text", async () => {
  const { page, problems } = await open(env("CG_INJECTION_REPORT"));
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator("img").count(), 0);
  assert.equal(await page.locator("script").count(), 2);
  const body = await page.evaluate(() => document.body.innerText);
  assert.ok(body.includes("</script><script>window.__pwned=1;alert(1)</script>"), "the span name is text");
  assert.ok(body.includes('<img src=x onerror="window.__pwned=2;alert(2)">'), "the label is text");
  assert.ok(body.includes("ctrl\\x01\\x1b[31mred\\u{202e}evil\\x85"), "control characters are visible");
  assert.ok(!body.includes("\u0001") && !body.includes("\u202e"), "no raw control character");
  // hover the span icicle and the chart: tooltips write text too
  await page.locator(".icicle.spans .node").first().hover();
  await page.locator(".chart-area").first().click();
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  const tipText = await page.locator("#tooltip").textContent();
  assert.ok(!tipText.includes("\u0001"));
  clean(problems);
});

test("the diff view states the peak change, sorts its tables and runs nothing from a trace", async () => {
  const diff = JSON.parse(readFileSync(env("CG_DIFF_JSON"), "utf8"));
  const { page, problems } = await open(env("CG_DIFF_REPORT"));
  // the headline ranks the pass whose peak changed most first, and the findings are compared
  const top = diff.passes.filter((p) => p.peak_bytes.delta).sort((a, b) => Math.abs(b.peak_bytes.delta) - Math.abs(a.peak_bytes.delta))[0];
  const headline = await page.locator("[data-headline]").first().textContent();
  const lines = [headline, ...(await page.locator("dd:has([data-headline]) li").allTextContents())];
  // issue 43: with op times compared the largest timing gap leads, with its interval; the peak
  // change follows
  assert.ok(lines.some((l) => l.startsWith(`the ${top.pass} pass's peak`)), lines.join(" | "));
  if (headline.startsWith("largest gap")) assert.match(headline, /\(95% /, headline);
  const compared = await page.locator("dd:has([data-findings]), [data-findings]").first().textContent();
  assert.match(compared, /activations_retained_into_optimizer/);
  assert.ok(diff.findings.some((f) => f.code === "activations_retained_into_optimizer" && f.change === "changed"));
  const peak = page.locator("[data-bytes-delta][data-device]").first();
  assert.equal(Number(await peak.getAttribute("data-bytes-delta")), diff.memory.devices[0].peak_bytes.delta);
  assert.equal(Number(await peak.getAttribute("data-bytes-baseline")), diff.memory.devices[0].peak_bytes.baseline.median);
  // both memory timelines on one chart, each series reaching its run's peak on the device
  const overlay = page.locator("#overlay-0");
  assert.equal(await overlay.locator("path.series").count(), 2);
  const maxes = await overlay.locator("path.series").evaluateAll((ps) => ps.map((p) => Number(p.dataset.seriesMax)));
  const devPeak = diff.memory.devices[0].peak_bytes;
  assert.deepEqual(maxes, [devPeak.baseline.median, devPeak.candidate.median]);
  const box = await overlay.locator("svg").boundingBox();
  assert.ok(box.width > 200 && box.height > 60, `the overlay is drawn (${JSON.stringify(box)})`);
  // the span table sorts by impact, both ways
  const spans = page.locator("#spans-table");
  const impacts = async () => Promise.all(
    (await spans.locator("tbody tr").all()).map(async (r) => Number(await r.locator("td").first().getAttribute("data-sort"))));
  await spans.locator("th button").first().click();
  const desc = await impacts();
  assert.deepEqual(desc, [...desc].sort((a, b) => b - a));
  await spans.locator("th button").first().click();
  const asc = await impacts();
  assert.deepEqual(asc, [...asc].sort((a, b) => a - b));
  assert.equal(asc.length, Math.min(diff.spans.length, 300));
  await page.setViewportSize({ width: 380, height: 800 });
  await page.waitForTimeout(250);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `no horizontal scrolling of the page at 380 px (${overflow} px)`);
  clean(problems);
  const inj = await open(env("CG_INJECTION_DIFF"));
  assert.equal(await inj.page.evaluate(() => window.__pwned), undefined);
  assert.equal(await inj.page.locator("script").count(), 2);
  assert.equal(await inj.page.locator("img").count(), 0);
  const body = await inj.page.evaluate(() => document.body.innerText);
  assert.ok(body.includes("</script><script>window.__pwned=1;alert(1)</script>"), "the span name is text");
  assert.ok(!body.includes("\u0001") && !body.includes("\u202e"), "no raw control character");
  clean(inj.problems);
});

// The flame graph of a sampled report: tabs per pass, click zooms (the node spans the full
// width), Escape and the reset button go back, Enter zooms by keyboard, names are text.
async function checkFlame(file, screenshot) {
  const { page, problems } = await open(file, { width: 1200, height: 900 });
  const area = page.locator(".flame-area");
  await area.scrollIntoViewIfNeeded();
  const tabs = page.locator(".flame-tabs button");
  assert.ok((await tabs.count()) >= 1, "a tab per pass");
  assert.equal(await tabs.first().getAttribute("aria-selected"), "true");
  const fullWidth = Number(await area.getAttribute("data-width"));
  assert.ok(fullWidth > 200);
  // the root spans the full width; pick a node below it that is narrower than the root
  const rootW = Number(await area.locator('g[data-node="0"] rect').getAttribute("data-width"));
  assert.equal(rootW, fullWidth);
  const candidates = area.locator("g.fn:not([data-node='0'])");
  assert.ok((await candidates.count()) >= 3, "the flame graph drew frames");
  let target = null;
  for (const g of await candidates.all()) {
    const w = Number(await g.locator("rect").getAttribute("data-width"));
    if (w < fullWidth * 0.9 && w > 20) { target = g; break; }
  }
  assert.ok(target, "a frame narrower than the full width");
  const id = await target.getAttribute("data-node");
  await target.click();
  assert.equal(await area.getAttribute("data-zoom"), id);
  const zoomedW = Number(await area.locator(`g[data-node="${id}"] rect`).getAttribute("data-width"));
  assert.equal(zoomedW, fullWidth, "the zoomed frame takes the full width");
  assert.match(await page.locator(".flame-info").textContent(), /zoomed into/);
  // Escape resets (focus is on the zoomed frame)
  await page.keyboard.press("Escape");
  assert.equal(await area.getAttribute("data-zoom"), "0");
  // keyboard: down to the first child, Enter zooms into it; the reset button goes back
  await area.locator('g[data-node="0"]').focus();
  await page.keyboard.press("ArrowDown");
  const focused = await page.evaluate(() => document.activeElement.getAttribute("data-node"));
  assert.notEqual(focused, "0");
  await page.keyboard.press("Enter");
  assert.equal(await area.getAttribute("data-zoom"), focused);
  await page.locator(".flame-reset").click();
  assert.equal(await area.getAttribute("data-zoom"), "0");
  // hover shows the function and its samples
  await candidates.first().hover();
  assert.match(await page.locator("#tooltip").textContent(), /samples/);
  // every pass's tab draws its tree
  const n = await tabs.count();
  for (let i = 0; i < n; i++) {
    await tabs.nth(i).click();
    assert.ok((await area.locator("g.fn").count()) >= 1);
  }
  await tabs.first().click();
  if (n > 1) { // the tabs by keyboard
    await tabs.first().focus();
    await page.keyboard.press("ArrowRight");
    assert.equal(await tabs.nth(1).getAttribute("aria-selected"), "true");
    await tabs.first().click();
  }
  await page.mouse.move(0, 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  if (screenshot) {
    await page.evaluate(() => window.scrollTo(0, document.querySelector(".flame").getBoundingClientRect().top + window.scrollY - 120));
    await page.waitForTimeout(100);
    await page.screenshot({ path: screenshot });
    // zoomed into the frame clicked above, for the record
    await area.locator(`g[data-node="${id}"]`).click();
    await page.mouse.move(0, 0);
    await page.evaluate(() => window.scrollTo(0, document.querySelector(".flame").getBoundingClientRect().top + window.scrollY - 120));
    await page.waitForTimeout(100);
    await page.screenshot({ path: screenshot.replace(/\.png$/, "-zoomed.png") });
    await page.keyboard.press("Escape");
    // the dark theme
    await page.locator("#theme").click();
    await page.locator("#theme").click();
    await page.evaluate(() => window.scrollTo(0, document.querySelector(".flame").getBoundingClientRect().top + window.scrollY - 120));
    await page.waitForTimeout(100);
    await page.screenshot({ path: screenshot.replace(/\.png$/, "-dark.png") });
  }
  // a narrow window: the page does not scroll sideways, the flame graph still draws
  await page.setViewportSize({ width: 380, height: 800 });
  await page.waitForTimeout(250);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `no horizontal scrolling of the page at 380 px (${overflow} px)`);
  assert.ok((await area.locator("g.fn").count()) >= 1);
  await page.setViewportSize({ width: 1200, height: 900 });
  clean(problems);
  await page.close();
}

test("a sampled trace's report shows a zoomable flame graph per pass", async () => {
  await checkFlame(env("CG_SAMPLED_REPORT"), process.env.CG_FLAME_SCREENSHOT);
  // rooted at the step: in every pass the one frame under the pass is the step function
  // (llama::train_step, on every sample; `main` above it is cut)
  {
    const { page } = await open(env("CG_SAMPLED_REPORT"));
    const tabs = page.locator(".flame-tabs button");
    for (let i = 0; i < await tabs.count(); i++) {
      await tabs.nth(i).click();
      const row1 = await page.locator(".flame-area g.fn").evaluateAll((gs) => gs
        .filter((g) => g.querySelector("rect").getAttribute("y") === "18").map((g) => g.getAttribute("aria-label")));
      assert.equal(row1.length, 1, `one frame under the pass (${row1})`);
      assert.match(row1[0], /^llama::train_step: /);
      const names = await page.locator(".flame-area g.fn").evaluateAll((gs) => gs.map((g) => g.getAttribute("aria-label")));
      assert.ok(!names.some((n) => n.startsWith("main: ")), "the frames above the step are cut");
      // (the path may wrap after each `::`: zero-width spaces there)
      assert.match((await page.locator(".flame-info").textContent()).replace(/\u200b/g, ""), /rooted at the step's frame llama::train_step/);
    }
    await page.close();
  }
  // the markup in a frame's name is text, not markup
  const { page, problems } = await open(env("CG_SAMPLED_REPORT"));
  const tabs = page.locator(".flame-tabs button");
  for (let i = 0; i < await tabs.count(); i++) {
    await tabs.nth(i).click();
    const labels = await page.locator(".flame-area g.fn").evaluateAll((gs) => gs.map((g) => g.getAttribute("aria-label")));
    if (labels.some((l) => l.includes("<script>window.__pwned=3</script>"))) break;
    assert.ok(i + 1 < await tabs.count(), "the injected frame name appears as text in some pass");
  }
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator("script").count(), 2);
  assert.equal(await page.locator("img").count(), 0);
  clean(problems);
});

// The probe's own frames are marked (class and label) and can be hidden; names cut to fit keep
// their function (the last path segment), eliding the middle.
test("the demo's flame graph marks the probe's frames, hides them on request, keeps function names", async () => {
  const { page, problems } = await open(env("CG_DEMO_REPORT"), { width: 1280, height: 900 });
  if (!(await page.locator(".flame-area").count())) { await page.close(); return; }
  await page.locator(".flame-area").scrollIntoViewIfNeeded();
  const texts = await page.locator(".flame-area g.fn").evaluateAll((gs) => gs.map((g) => {
    const t = g.querySelector("text");
    return [g.getAttribute("aria-label").split(": ")[0].replace(/ \[.*\]$/, ""), t ? t.textContent : null];
  }));
  for (const [full, shown] of texts) {
    if (!shown || !shown.includes("…") || !full.includes("::")) continue;
    const last = full.slice(full.lastIndexOf("::") + 2);
    assert.ok(shown.endsWith(last) || !shown.includes("::"), `"${shown}" keeps the function of ${full}`);
  }
  // rooted at the step: in every pass one frame under the pass, the step's frame the info names
  {
    const tabs = page.locator(".flame-tabs button");
    for (let i = 0; i < await tabs.count(); i++) {
      await tabs.nth(i).click();
      const row1 = await page.locator(".flame-area g.fn").evaluateAll((gs) => gs
        .filter((g) => g.querySelector("rect").getAttribute("y") === "18").map((g) => g.getAttribute("aria-label")));
      const info = (await page.locator(".flame-info").textContent()).replace(/\u200b/g, "");
      const root = info.match(/rooted at the step's frame (.+?) \(the frames above it/);
      assert.ok(root, `the pass is rooted at the step (${info})`);
      // the step's frame, and beside it at most the node of the samples outside the step
      // (the loop between captured steps)
      const step = row1.filter((l) => l.startsWith(`${root[1]}: `) || l.startsWith(`${root[1]} [`));
      assert.equal(step.length, 1, `the step's frame ${root[1]} under the pass (${row1})`);
      assert.ok(row1.every((l) => step.includes(l) || l.startsWith("(outside the step): ")), `only the step and the outside node under the pass (${row1})`);
      const names = await page.locator(".flame-area g.fn").evaluateAll((gs) => gs.map((g) => g.getAttribute("aria-label")));
      assert.ok(!names.some((n) => /^(main|_start|__libc_start_call_main): /.test(n)), "process start-up frames cut");
    }
  }
  const toggle = page.locator(".flame-hide-probe");
  if (await toggle.count()) {
    const tabs = page.locator(".flame-tabs button");
    let marked = 0;
    for (let i = 0; i < await tabs.count(); i++) {
      await tabs.nth(i).click();
      marked += await page.locator(".flame-area g.fn.probe").count();
    }
    assert.ok(marked > 0, "the probe's frames are marked");
    await toggle.check();
    for (let i = 0; i < await tabs.count(); i++) {
      await tabs.nth(i).click();
      assert.equal(await page.locator(".flame-area g.fn.probe").count(), 0, "hidden");
    }
    assert.match(await page.locator(".flame-info").textContent(), /the probe's own \d+ samples hidden/);
  }
  clean(problems);
});

test("optional: more sampled reports", { skip: !process.env.CG_EXTRA_SAMPLED }, async () => {
  // CG_EXTRA_SHOTS=1: a screenshot next to each report (NAME-flame.png)
  for (const f of process.env.CG_EXTRA_SAMPLED.split(":"))
    await checkFlame(f, process.env.CG_EXTRA_SHOTS ? f.replace(/\.html$/, "-flame.png") : null);
});

test("optional: the render time of a large report", { skip: !process.env.CG_PERF_REPORT }, async () => {
  const runs = [];
  for (let i = 0; i < 3; i++) {
    const { page, problems, loadMs } = await open(process.env.CG_PERF_REPORT);
    const script = Number(await page.evaluate(() => document.documentElement.dataset.renderMs));
    runs.push({ loadMs, script });
    clean(problems);
    await page.close();
  }
  console.log(`large report: ${JSON.stringify(runs)}`);
});
