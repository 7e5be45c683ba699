// The local status page in real headless Chromium against the real daemon on a
// simulated site (battery, PV, grid meter, relay over Modbus TCP).
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { event, makeRig, rigConfig, siteScenario, waitPaired, type DispatchRig } from "../support/dispatch.js";
import { startSink } from "../support/partner-sink.js";
import { startGateway } from "../support/gateway.js";
import { startSim } from "../../hw-sim/sim.js";
import { makeTmpDir } from "../support/tmp.js";
import { TEST_PASSWORD } from "../support/config.js";
import { DESKTOP, PHONE, launchBrowser } from "../support/browser.js";
import { until } from "../support/wait.js";

const SCREENSHOTS = resolve(fileURLToPath(import.meta.url), "../../../../var/screenshots");
const PAGES = ["", "devices", "buses", "events", "uplink", "commissioning"];

describe("status page in a browser", () => {
  let rig: DispatchRig;
  let browser: Browser;
  // Each test has its own browser context (cookies, session) and page, closed after it.
  let ctx: BrowserContext;
  let page: Page;
  const cleanup: Array<() => unknown> = [];

  before(async () => {
    const sink = await startSink();
    cleanup.unshift(() => sink.stop());
    const tmp = makeTmpDir();
    cleanup.unshift(tmp.cleanup);
    const site = await startSim(siteScenario({ irradiance: 0.4 }), { baseDir: tmp.dir });
    cleanup.unshift(() => site.stop());
    const gw = await startGateway(join(tmp.dir, "data"), { ...rigConfig(site, sink), ui: { enabled: true } });
    cleanup.unshift(() => gw.stop());
    await waitPaired(gw, 4);
    rig = makeRig(site, gw, sink, tmp.dir);
    browser = await launchBrowser();
    cleanup.unshift(() => browser.close());
  });

  after(async () => {
    for (const c of cleanup) await c();
  });

  beforeEach(async (t) => {
    ctx = await browser.newContext({ ignoreHTTPSErrors: true, viewport: DESKTOP });
    page = await ctx.newPage();
    // Every test but the one about logging in starts logged in.
    if (!t.name.startsWith("nothing is reachable without a login")) await login(TEST_PASSWORD);
  });

  afterEach(async () => {
    await ctx.close();
  });

  const url = (p: string) => `${rig.gw.url}/ui/${p}`;

  async function login(password: string): Promise<void> {
    await page.goto(url("login"));
    await page.fill("#username", "partner");
    await page.fill("#password", password);
    await Promise.all([page.waitForNavigation(), page.click("#login-submit")]);
  }

  /** Records the status page responses this test's page receives. */
  function recordResponses(): Array<{ url: string; status: number; headers: Record<string, string> }> {
    const seen: Array<{ url: string; status: number; headers: Record<string, string> }> = [];
    page.on("response", (r) => {
      if (new URL(r.url()).pathname.startsWith("/ui")) seen.push({ url: r.url(), status: r.status(), headers: r.headers() });
    });
    return seen;
  }

  test("nothing is reachable without a login; a wrong password is refused; the right one opens the overview", async () => {
    const res = await page.goto(url(""));
    assert.equal(new URL(page.url()).pathname, "/ui/login", "redirected to the login page");
    assert.equal(res?.status(), 200);
    for (const p of ["", "devices", "commissioning", "assets/app.js"]) {
      const r = await rig.gw.call("GET", `/ui/${p}`);
      assert.equal(r.status, 303, `/ui/${p} without a session`);
      assert.equal(r.headers.location, "/ui/login");
    }
    for (const p of ["api/overview", "api/devices", "api/session", "api/uplink"]) {
      assert.equal((await rig.gw.call("GET", `/ui/${p}`)).status, 401, `/ui/${p} without a session`);
    }
    assert.equal((await rig.gw.call("POST", "/ui/api/commission/scan", { body: { endpoint: "tcp://127.0.0.1:1" } })).status, 401);
    // A forged session cookie is nobody.
    assert.equal((await rig.gw.call("GET", "/ui/api/overview", { headers: { cookie: "sg_session=forged" } })).status, 401);
    // A login post without the form's CSRF cookie is refused even with the right password.
    const noCsrf = await rig.gw.call("POST", "/ui/login", { form: { username: "partner", password: TEST_PASSWORD, csrf: "x" } });
    assert.equal(noCsrf.status, 403);
    assert.equal(noCsrf.headers["set-cookie"]?.toString().includes("sg_session="), false);

    await login("not-the-password");
    assert.equal(new URL(page.url()).pathname, "/ui/login");
    assert.match((await page.textContent("#login-error")) ?? "", /wrong username or password/i);
    assert.equal(
      (await ctx.cookies()).some((c) => c.name === "sg_session"),
      false,
      "no session after a wrong password",
    );

    await login(TEST_PASSWORD);
    assert.equal(new URL(page.url()).pathname, "/ui/");
    const cookie = (await ctx.cookies()).find((c) => c.name === "sg_session");
    assert.ok(cookie, "session cookie set");
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.secure, true);
    assert.equal(cookie.sameSite, "Strict");
    await page.waitForSelector("#flow-battery-w[data-value]");
  });

  // First among the pages that show buses: no look at the Buses page has happened before this one.
  test("the Buses page shows a utilisation figure at its first look, over the last minute", async () => {
    await page.goto(url("buses"));
    await page.waitForSelector("#status-line:has-text('updated')");
    const cells = await page.$$eval('#bus-table [data-field="utilisation"]', (els) => els.map((e) => e.textContent?.trim() ?? ""));
    assert.ok(cells.length >= 1, "a bus row");
    for (const c of cells) assert.match(c, /^\d+(\.\d)? %$/, `a figure, not "${c}"`);
  });

  test("the gateway's root leads to the status page; an API client's other paths keep their JSON answers", async () => {
    const root = await rig.gw.call("GET", "/", { headers: { accept: "text/html" } });
    assert.equal(root.status, 302);
    assert.equal(root.headers.location, "/ui/");
    const unknown = await rig.gw.call("GET", "/nope", { headers: { accept: "application/json" } });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error, "not_found");
    assert.equal((await rig.gw.call("GET", "/openapi.json")).status, 200);
    // A person typing the address lands on the login, then the overview.
    await page.goto(`${rig.gw.url}/`);
    assert.equal(new URL(page.url()).pathname, "/ui/");
    await page.waitForSelector("#flow-battery-w[data-value]");
  });

  test("every placeholder of every served page is filled: the login heading names the site", async () => {
    const login = await rig.gw.call("GET", "/ui/login");
    assert.equal(login.status, 200);
    assert.doesNotMatch(login.text, /\{\{/, "no placeholder left on the login page");
    assert.match(login.text, /<h1>sitegate <span class="muted">site-001<\/span><\/h1>/);
    assert.match(login.text, /<title>sitegate site-001 · log in<\/title>/);
    const cookie = (await ctx.cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
    for (const p of [...PAGES, "assets/app.js", "assets/app.css"]) {
      const r = await rig.gw.call("GET", `/ui/${p}`, { headers: { cookie } });
      assert.equal(r.status, 200, `/ui/${p}`);
      assert.doesNotMatch(r.text, /\{\{\s*[A-Za-z0-9_]+\s*\}\}/, `/ui/${p} has no placeholder left`);
    }
    // A wrong password's page (the message filled in) too.
    await page.goto(url("login"));
    assert.doesNotMatch(await page.content(), /\{\{/);
  });

  test("the overview's battery power follows a discharge in the simulator", async () => {
    await page.goto(url(""));
    await page.waitForSelector("#flow-battery-w[data-value]");
    const shown = async (id: string) => Number(await page.getAttribute(id, "data-value"));
    assert.ok(Math.abs(await shown("#flow-battery-w")) < 100, "battery idle at first");
    const ev = event({ event_type: "discharge", event_quantity: 2.5, event_unit: "kW" }, 1000, 20_000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [ev] })).status, 200);
    await until(() => Math.abs((rig.simDevice("battery").power_w as number) - 2500) < 100, "simulated battery discharging at 2.5 kW");
    const simW = rig.simDevice("battery").power_w as number;
    // The page follows the simulator (waited for as an event; its 3 s update bound is a
    // latency, measured by the ui bench, not asserted here).
    await page.waitForFunction(
      (w) => Math.abs(Number(document.querySelector("#flow-battery-w")?.getAttribute("data-value")) - w) < 150,
      simW,
      { timeout: 30_000 },
    );
    assert.match((await page.textContent("#flow-battery-w")) ?? "", /kW/);
    // load = grid + pv + battery, from one reading of the page.
    const [bat, grid, pv, load] = await Promise.all(["#flow-battery-w", "#flow-grid-w", "#flow-pv-w", "#flow-load-w"].map(shown));
    assert.ok(Math.abs(load - (grid + pv + bat)) <= 2, `load ${load} = grid ${grid} + pv ${pv} + battery ${bat}`);
    assert.ok(pv > 0, "pv produces");
    assert.match((await page.textContent("#flow-soc")) ?? "", /SoC \d/);
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, "overview-discharging-desktop.png") });
    await rig.dr({ mode: "live", event_slots: [{ ...ev, cancelled: true }] });
  });

  test("the device list matches device sync, with identity, health and a 24 h chart", async () => {
    const sync = await rig.gw.call("GET", "/v1/api/gateway/site-001/devicesync", { headers: rig.gw.apiKeyHeaders });
    const syncIds = (sync.json.devices as Array<{ device_id: string }>).map((d) => d.device_id).sort();
    assert.deepEqual(syncIds, ["battery", "grid", "pv", "relay"]);
    await page.goto(url("devices"));
    await page.waitForSelector("[data-device-id] .chart");
    const ids = (await page.$$eval("[data-device-id]", (els) => els.map((e) => e.getAttribute("data-device-id") ?? ""))).sort();
    assert.deepEqual(ids, syncIds);
    const battery = page.locator('[data-device-id="battery"]');
    assert.match((await battery.textContent()) ?? "", /online/);
    // Codes in words as the terminal prints them, the number in the tooltip.
    assert.equal(await battery.locator('[data-field="device_type"]').textContent(), "battery inverter");
    assert.equal(await battery.locator('[data-field="device_type"]').getAttribute("title"), "device_type 10");
    const syncMode = (sync.json.devices as Array<{ device_id: string; device_op_mode: number }>).find(
      (d) => d.device_id === "battery",
    )!.device_op_mode;
    assert.match(
      (await battery.locator('[data-field="op_mode"]').textContent()) ?? "",
      /^(unknown|local automatic|remote dispatch|standby|fault)$/,
    );
    assert.match((await battery.locator('[data-field="op_mode"]').getAttribute("title")) ?? "", /^device_op_mode [0-4]$/);
    assert.ok(syncMode >= 0 && syncMode <= 4);
    // The battery's states (SunSpec ChaSt, StorCtl_Mod) in words, never a bare number.
    const chaSt = battery.locator('tr[data-metric="battery_state"] td.named');
    assert.match((await chaSt.textContent()) ?? "", /^(off|empty|discharging|charging|full|holding|testing)$/);
    assert.match((await chaSt.getAttribute("title")) ?? "", /^battery_state [1-7]$/);
    assert.match((await battery.locator('tr[data-metric="storage_mode"] td.named').textContent()) ?? "", /^(own control|forced)/);
    for (const cell of await page.locator("[data-device-id] td.named").all())
      assert.doesNotMatch((await cell.textContent()) ?? "", /^\d+$/, "a named reading shows its name");
    // The relay's coils as the simulator holds them, in the terminal's words.
    const coils = (rig.simDevice("relay").coils as boolean[]).map((c, i) => `${i + 1}:${c ? "on" : "off"}`).join(" ");
    await page.waitForSelector(`[data-device-id="relay"] tr[data-metric="state"] td.named:text-is("coils ${coils}")`);
    const mask = (rig.simDevice("relay").coils as boolean[]).reduce((m, c, i) => m + (c ? 2 ** i : 0), 0);
    assert.equal(await page.getAttribute('[data-device-id="relay"] tr[data-metric="state"] td.named', "title"), `state ${mask}`);
    assert.equal(await battery.locator('[data-field="last_error"]').textContent(), "none");
    assert.ok(await battery.locator('tr[data-metric="soc_pct"]').count(), "live soc_pct");
    // A click on a metric charts that metric.
    await battery.locator('tr[data-metric="soc_pct"]').click();
    await page.waitForSelector('[data-device-id="battery"] tr.selected[data-metric="soc_pct"]');
    assert.match((await battery.locator(".chart").getAttribute("aria-label")) ?? "", /soc_pct/);
    assert.ok(await battery.locator(".chart polyline").count(), "a line of 1-minute means");
    // The gateway has run a minute or two: the chart spans what the history holds, not 24 h,
    // and the line takes a good part of the width instead of a sliver at the right edge.
    const chart = battery.locator(".chart");
    const span = Number(await chart.getAttribute("data-t1")) - Number(await chart.getAttribute("data-t0"));
    assert.ok(span >= 120_000 && span <= 10 * 60_000, `the chart spans ${span} ms`);
    const [line, frame] = await Promise.all([chart.locator("polyline").boundingBox(), chart.boundingBox()]);
    assert.ok(line && frame && line.width >= frame.width * 0.25, `the line is ${line?.width} of ${frame?.width} px wide`);
    // Its labels are readable on a phone.
    await page.setViewportSize(PHONE);
    const label = await chart.locator("text").first().boundingBox();
    assert.ok(label && label.height >= 9, `a chart label is ${label?.height} px tall at phone width`);
  });

  test("the events timeline zooms to the events; each event says why it ended", async () => {
    // A shed ended early by a restore, the restore itself (completed), and an event cancelled before its start.
    const shed = event({ event_type: "shed", event_quantity: 0.5, event_unit: "kW", priority: 50 }, 800, 60_000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [shed] })).status, 200);
    await until(() => (rig.simDevice("relay").coils as boolean[]).some((c) => !c), "a relay coil open for the shed");
    const restore = event({ event_type: "restore", event_quantity: 1, event_unit: "kW", priority: 50 }, 500, 3000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [restore] })).status, 200);
    assert.match((await rig.waitResponse(shed.event_id)).details.ended_by, /^ended by restore /);
    assert.equal((await rig.waitResponse(restore.event_id)).status, "completed");
    const later = event({ event_type: "discharge", event_quantity: 1, event_unit: "kW" }, 10 * 60_000, 60_000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [later] })).status, 200);
    assert.equal((await rig.dr({ mode: "live", event_slots: [{ ...later, cancelled: true }] })).status, 200);

    await page.goto(url("events"));
    const reason = (id: string) => page.locator(`#event-table tr[data-event-id="${id}"] [data-field="end_reason"]`);
    await page.waitForSelector(`#event-table tr[data-event-id="${later.event_id}"] [data-field="end_reason"]`);
    assert.equal(await reason(shed.event_id).textContent(), `ended by restore ${restore.event_id.slice(0, 8)}`);
    assert.equal(await reason(restore.event_id).textContent(), "completed");
    assert.equal(await reason(later.event_id).textContent(), "cancelled");
    assert.match((await page.textContent(`#event-table tr[data-event-id="${shed.event_id}"]`)) ?? "", /planned to/);

    // The axis spans the events shown (and now, which is among them), not a fixed +-12 h.
    const api = (await page.evaluate(async () => (await fetch("/ui/api/events")).json())) as {
      events: Array<{ event_id: string; start_time: string; end_time: string }>;
    };
    const svg = page.locator("#event-timeline svg");
    const t0 = Number(await svg.getAttribute("data-t0"));
    const t1 = Number(await svg.getAttribute("data-t1"));
    const drawn = await page.$$eval("#event-timeline rect[data-event-id]", (els) => els.map((e) => e.getAttribute("data-event-id")));
    const shown = api.events.filter((e) => drawn.includes(e.event_id));
    assert.ok(shown.some((e) => e.event_id === later.event_id) && shown.some((e) => e.event_id === shed.event_id), "the events are drawn");
    const from = Math.min(Date.now(), ...shown.map((e) => Date.parse(e.start_time)));
    const to = Math.max(...shown.map((e) => Date.parse(e.end_time)));
    assert.ok(t0 <= from && t1 >= to, "every event is inside the drawn range");
    assert.ok(t1 - t0 <= (to - from) * 1.25, `the range (${t1 - t0} ms) is the events' (${to - from} ms), not 24 h`);
    const shedBar = await page.locator(`#event-timeline rect[data-event-id="${shed.event_id}"]`).boundingBox();
    assert.ok(shedBar && shedBar.width >= 2, `the shed's window is a bar one can see (${shedBar?.width} px)`);
  });

  test("a scan from the commissioning form finds the simulator's units; a read shows one device; bad input gets a clear message", async () => {
    await page.goto(url("commissioning"));
    const endpoint = `tcp://127.0.0.1:${rig.site.tcpPorts[0]}`;
    await page.fill("#scan-endpoint", endpoint);
    await page.fill("#scan-to", "20");
    // The simulator's TCP gateway answers an absent id at once (exception 11): a generous
    // timeout costs nothing, and no loaded machine misses an answer by it.
    await page.fill("#scan-timeout", "3000");
    await page.click("#scan-submit");
    await page.waitForSelector("#commission-progress-text:has-text('done')", { timeout: 60_000 });
    const units = await page.$$eval("#scan-found li", (els) => els.map((e) => Number(e.getAttribute("data-unit"))));
    assert.deepEqual(units, [1, 10, 11, 12]);
    assert.equal(await page.getAttribute("#commission-progress", "value"), "20");
    // In an installer's words, never an answer that reads like an error.
    assert.equal(await page.textContent('#scan-found li[data-unit="1"]'), "unit 1: SunSpec battery inverter (profile sunspec)");
    for (const li of await page.$$eval("#scan-found li", (els) => els.map((e) => e.textContent ?? "")))
      assert.match(li, /^unit \d+: (answers, not a known device|.+ \(profile [a-z0-9-]+\))$/);

    await page.fill("#read-endpoint", endpoint);
    await page.fill("#read-unit", "1");
    await page.selectOption("#read-profile", "sunspec");
    await page.click("#read-submit");
    await page.waitForSelector('#read-result tr[data-key="soc_pct"]', { timeout: 30_000 });
    assert.equal(await page.textContent('#read-result tr[data-key="device_type"] td.named'), "battery inverter");
    assert.equal(await page.getAttribute('#read-result tr[data-key="device_type"] td.named', "title"), "device_type 10");
    // The read names the battery's state as `sitegate read` does, the number in the tooltip.
    assert.match((await page.textContent('#read-result tr[data-key="battery_state"] td.named')) ?? "", /^[a-z ]+$/);
    assert.match((await page.getAttribute('#read-result tr[data-key="battery_state"] td.named', "title")) ?? "", /^battery_state [1-7]$/);

    await page.fill("#scan-to", "300");
    await page.click("#scan-submit");
    await page.waitForSelector("#commission-error:has-text('1..247')");
    await page.fill("#scan-to", "20");
    await page.fill("#scan-endpoint", "ftp://somewhere");
    await page.click("#scan-submit");
    await page.waitForFunction(
      () =>
        (document.querySelector("#commission-error")?.textContent ?? "").length > 0 &&
        !document.querySelector("#commission-error")!.textContent!.includes("1..247"),
    );
    assert.match((await page.textContent("#commission-error")) ?? "", /endpoint|tcp:\/\/|rtu:/i);
    await page.fill("#read-unit", "256");
    await page.click("#read-submit");
    await page.waitForSelector("#commission-error:has-text('unit must be a number 0..255')");
    // Without the session's CSRF token a state-changing request is refused.
    const cookies = (await ctx.cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
    const r = await rig.gw.call("POST", "/ui/api/commission/scan", { body: { endpoint }, headers: { cookie: cookies } });
    assert.equal(r.status, 403);
    assert.match(r.json.message, /CSRF/);
  });

  test("every status page response carries the security headers", async () => {
    const seen = recordResponses();
    for (const p of ["", "devices", "buses", "events", "uplink", "commissioning"]) {
      await page.goto(url(p));
      await page.waitForLoadState("networkidle");
    }
    const extra = await Promise.all([
      rig.gw.call("GET", "/ui/login"),
      rig.gw.call("GET", "/ui/nope"),
      rig.gw.call("GET", "/ui/api/overview"),
      rig.gw.call("GET", "/ui/assets/app.css"),
    ]);
    const all = [
      ...seen,
      ...extra.map((r, i) => ({
        url: `extra ${i}`,
        status: r.status,
        headers: Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, String(v)])),
      })),
    ];
    assert.ok(all.length > 20, `${all.length} responses seen`);
    for (const r of all) {
      const csp = r.headers["content-security-policy"] ?? "";
      assert.match(csp, /frame-ancestors 'none'/, `${r.url} (${r.status}) CSP`);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, r.url);
      assert.match(csp, /script-src 'self'/, r.url);
      assert.equal(r.headers["x-frame-options"], "DENY", r.url);
      assert.equal(r.headers["x-content-type-options"], "nosniff", r.url);
    }
    // The pages ran under that CSP without violations: every view rendered.
    assert.ok(seen.some((r) => r.url.includes("/ui/api/uplink") && r.status === 200));
  });

  test("screenshots of every page at desktop and phone size", async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    for (const [size, vp] of [
      ["desktop", DESKTOP],
      ["phone", PHONE],
    ] as const) {
      await page.setViewportSize(vp);
      for (const p of PAGES) {
        await page.goto(url(p));
        await page.waitForSelector(p === "commissioning" ? "#commission-progress-text:not(:empty)" : "#status-line:has-text('updated')");
        if (p === "devices") await page.waitForSelector("[data-device-id] .chart");
        await page.screenshot({ path: join(SCREENSHOTS, `${p || "overview"}-${size}.png`), fullPage: true });
      }
    }
    // On a phone the navigation wraps under the title instead of overflowing the page.
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= PHONE.width, `no horizontal scroll at phone width (${width})`);
  });

  test("logging out ends the session on the server, not only in the browser", async () => {
    await page.goto(url("devices"));
    await page.waitForSelector("#status-line:has-text('updated')");
    const session = (await ctx.cookies()).find((c) => c.name === "sg_session");
    assert.ok(session, "logged in");
    const old = { cookie: `sg_session=${session.value}` };
    assert.equal((await rig.gw.call("GET", "/ui/api/overview", { headers: old })).status, 200, "the cookie works before the logout");
    // A logout without the session's CSRF token is refused and ends nothing.
    const forged = await rig.gw.call("POST", "/ui/logout", { form: { csrf: "forged" }, headers: old });
    assert.equal(forged.status, 403);
    assert.equal((await rig.gw.call("GET", "/ui/api/overview", { headers: old })).status, 200, "still logged in");
    await Promise.all([page.waitForNavigation(), page.click("#logout-form button")]);
    assert.equal(new URL(page.url()).pathname, "/ui/login");
    assert.equal(
      (await ctx.cookies()).some((c) => c.name === "sg_session" && c.value !== ""),
      false,
      "the browser dropped the cookie",
    );
    // The old cookie, replayed, is nobody now.
    assert.equal((await rig.gw.call("GET", "/ui/api/overview", { headers: old })).status, 401);
    const r = await rig.gw.call("GET", "/ui/devices", { headers: old });
    assert.equal(r.status, 303);
    assert.equal(r.headers.location, "/ui/login");
  });

  test("failed logins are rate limited per source", async () => {
    const ctx2 = await browser.newContext({ ignoreHTTPSErrors: true });
    const p2 = await ctx2.newPage();
    try {
      let last = 0;
      for (let i = 0; i < 6; i++) {
        await p2.goto(url("login"));
        await p2.fill("#username", "partner");
        await p2.fill("#password", `wrong-${i}`);
        const [resp] = await Promise.all([p2.waitForResponse((r) => r.request().method() === "POST"), p2.click("#login-submit")]);
        last = resp.status();
        if (i < 5) assert.equal(last, 401, `attempt ${i + 1}`);
      }
      assert.equal(last, 429);
      assert.match((await p2.textContent("#login-error")) ?? "", /too many failed logins/i);
      // Even the right password waits now.
      await p2.goto(url("login"));
      await p2.fill("#username", "partner");
      await p2.fill("#password", TEST_PASSWORD);
      const [resp] = await Promise.all([p2.waitForResponse((r) => r.request().method() === "POST"), p2.click("#login-submit")]);
      assert.equal(resp.status(), 429);
      assert.ok(Number(resp.headers()["retry-after"]) > 0);
    } finally {
      await ctx2.close();
    }
  });
});
