// sitegate status page. Plain DOM, no framework, no inline script or style (CSP). Every
// page is the same shell; the path picks the view. Values go in with textContent only.
const SVG = "http://www.w3.org/2000/svg";
const page = location.pathname.replace(/^\/ui\/?/, "").replace(/\/$/, "");
let session = null;

function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of kids.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}
function s(tag, attrs = {}, ...kids) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue;
    if (k === "text") el.textContent = v;
    else el.setAttribute(k, String(v));
  }
  for (const c of kids.flat()) if (c) el.append(c);
  return el;
}
const view = () => document.getElementById("view");
const status = (msg) => { document.getElementById("status-line").textContent = msg; };

async function api(path, opts = {}) {
  const headers = { accept: "application/json" };
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  if (opts.method && opts.method !== "GET") headers["x-csrf-token"] = session?.csrf ?? "";
  const res = await fetch(`/ui/api/${path}`, { method: opts.method ?? "GET", headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), credentials: "same-origin" });
  if (res.status === 401) { location.href = "/ui/login"; throw new Error("logged out"); }
  const json = await res.json().catch(() => ({}));
  if (!res.ok) throw Object.assign(new Error(json.message ?? `HTTP ${res.status}`), { status: res.status });
  return json;
}

function every(ms, fn) {
  let stopped = false;
  const run = async () => {
    if (stopped) return;
    try { await fn(); status(`updated ${new Date().toLocaleTimeString()}`); } catch (e) { status(`update failed: ${e.message}`); }
    if (!stopped) setTimeout(run, ms);
  };
  void run();
  return () => { stopped = true; };
}

function watts(w) {
  if (w === null || w === undefined) return "–";
  const a = Math.abs(w);
  return a >= 10000 ? `${(w / 1000).toFixed(1)} kW` : a >= 1000 ? `${(w / 1000).toFixed(2)} kW` : `${Math.round(w)} W`;
}
function num(v) {
  if (v === null || v === undefined) return "–";
  return Number.isInteger(v) ? String(v) : v.toFixed(Math.abs(v) >= 100 ? 1 : 2);
}
function ago(iso) {
  if (!iso) return "never";
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  return s < 60 ? `${s} s ago` : s < 3600 ? `${Math.round(s / 60)} min ago` : `${(s / 3600).toFixed(1)} h ago`;
}
const time = (iso) => (iso ? new Date(iso).toLocaleString() : "–");
const badge = (text, cls) => h("span", { class: `badge ${cls ?? text}`, text });

// ---- Overview: SVG power flow, live every second ----
function overviewPage() {
  const hub = { x: 200, y: 170 };
  const nodes = {
    pv: { x: 200, y: 50, label: "PV" },
    grid: { x: 60, y: 170, label: "Grid" },
    load: { x: 340, y: 170, label: "Load" },
    battery: { x: 200, y: 290, label: "Battery" },
  };
  const lines = {};
  const values = {};
  const svg = s("svg", { class: "flow", viewBox: "0 0 400 350", role: "img", "aria-label": "power flow" });
  for (const [k, n] of Object.entries(nodes)) {
    lines[k] = s("line", { class: k, x1: n.x, y1: n.y, x2: hub.x, y2: hub.y });
    svg.append(lines[k]);
  }
  svg.append(s("circle", { class: "hub", cx: hub.x, cy: hub.y, r: 8 }));
  let socFill = null;
  let socText = null;
  for (const [k, n] of Object.entries(nodes)) {
    const g = s("g", { class: `node ${k}`, id: `node-${k}` });
    g.append(s("circle", { cx: n.x, cy: n.y, r: 46 }));
    g.append(s("text", { class: "label", x: n.x, y: n.y - 10, text: n.label }));
    values[k] = s("text", { class: "value", x: n.x, y: n.y + 12, "data-metric": `${k}_w`, id: `flow-${k}-w`, text: "–" });
    g.append(values[k]);
    if (k === "battery") {
      g.append(s("rect", { class: "soc-bg", x: n.x - 25, y: n.y + 20, width: 50, height: 7, rx: 3 }));
      socFill = s("rect", { class: "soc-fill", x: n.x - 25, y: n.y + 20, width: 0, height: 7, rx: 3 });
      g.append(socFill);
      socText = s("text", { class: "label", x: n.x, y: n.y + 58, "data-metric": "soc_pct", id: "flow-soc", text: "SoC –" });
      svg.append(socText);
    }
    svg.append(g);
  }
  const kpi = (id, label) => h("div", { class: "kpi" }, h("span", { class: "muted small", text: label }), h("b", { id, text: "–" }));
  view().append(h("h2", { text: "Overview" }), h("div", { class: "card" }, svg),
    h("div", { class: "kpis" }, kpi("kpi-pv", "PV"), kpi("kpi-battery", "Battery (+ discharging)"), kpi("kpi-soc", "State of charge"), kpi("kpi-grid", "Grid (+ import)"), kpi("kpi-load", "Load"), kpi("kpi-devices", "Devices online")),
    h("p", { class: "muted small", text: "Load = grid + PV + battery. Updated every second." }));
  const setFlow = (k, w, towardHub) => {
    values[k].textContent = watts(w);
    values[k].setAttribute("data-value", w === null ? "" : String(Math.round(w)));
    const active = w !== null && Math.abs(w) >= 1;
    lines[k].classList.toggle("active", active);
    lines[k].classList.toggle("reverse", active && !towardHub(w));
  };
  every(1000, async () => {
    const o = await api("overview");
    setFlow("pv", o.pv_w, (w) => w > 0);
    setFlow("battery", o.battery_w, (w) => w > 0);
    setFlow("grid", o.grid_w, (w) => w > 0);
    setFlow("load", o.load_w, (w) => w < 0);
    socFill.setAttribute("width", String(o.soc_pct === null ? 0 : Math.max(0, Math.min(100, o.soc_pct)) / 2));
    socText.textContent = o.soc_pct === null ? "SoC –" : `SoC ${o.soc_pct} %`;
    socText.setAttribute("data-value", o.soc_pct === null ? "" : String(o.soc_pct));
    document.getElementById("kpi-pv").textContent = watts(o.pv_w);
    document.getElementById("kpi-battery").textContent = watts(o.battery_w);
    document.getElementById("kpi-soc").textContent = o.soc_pct === null ? "–" : `${o.soc_pct} %`;
    document.getElementById("kpi-grid").textContent = watts(o.grid_w);
    document.getElementById("kpi-load").textContent = watts(o.load_w);
    document.getElementById("kpi-devices").textContent = `${o.devices.online} / ${o.devices.configured}`;
  });
}

// ---- Devices: health, identity, live metrics, 24 h chart per metric ----
function chart(points, label) {
  const W = 600, H = 140, L = 44, B = 18;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${label}, last 24 h` });
  const now = Date.now();
  const t0 = now - 24 * 3600e3;
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W, y2: H - B }), s("line", { class: "axis", x1: L, y1: 0, x2: L, y2: H - B }));
  for (let i = 0; i <= 4; i++) {
    const x = L + ((W - L) * i) / 4;
    svg.append(s("text", { x, y: H - 4, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", text: i === 4 ? "now" : `-${24 - i * 6} h` }));
  }
  if (!points.length) {
    svg.append(s("text", { x: (W + L) / 2, y: H / 2, "text-anchor": "middle", text: "no data yet (one point per minute)" }));
    return svg;
  }
  let lo = Math.min(...points.map((p) => p[1])), hi = Math.max(...points.map((p) => p[1]));
  if (hi === lo) { hi += 1; lo -= 1; }
  const x = (t) => L + ((t - t0) / (now - t0)) * (W - L);
  const y = (v) => 4 + (1 - (v - lo) / (hi - lo)) * (H - B - 8);
  svg.append(s("text", { x: L - 4, y: 12, "text-anchor": "end", text: num(hi) }), s("text", { x: L - 4, y: H - B, "text-anchor": "end", text: num(lo) }));
  const pts = points.length === 1 ? [points[0], [points[0][0] + 60e3, points[0][1]]] : points;
  svg.append(s("polyline", { points: pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ") }));
  return svg;
}

function devicesPage() {
  const list = h("div", { class: "grid", id: "device-list" });
  view().append(h("h2", { text: "Devices" }), list);
  const selected = {};
  const charts = {};
  const loadChart = async (id, metric) => {
    const r = await api(`history?device=${encodeURIComponent(id)}&metric=${encodeURIComponent(metric)}`);
    charts[id] = { metric, points: r.points, at: Date.now() };
  };
  let devices = [];
  const render = () => {
    list.replaceChildren(...devices.map((d) => {
      const ident = Object.entries(d.identity);
      const rows = Object.entries(d.metrics).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) =>
        h("tr", { class: selected[d.device_id] === k ? "selected" : null, "data-metric": k, onclick: async () => { selected[d.device_id] = k; await loadChart(d.device_id, k); render(); } },
          h("td", { text: k }), h("td", { class: "num", text: num(v) })));
      const c = charts[d.device_id];
      return h("section", { class: "card device", "data-device-id": d.device_id },
        h("h3", {}, d.name, badge(d.online ? "online" : "offline", d.online ? "ok" : "bad"), d.fully_configured ? null : badge("not fully configured", "bad")),
        h("dl", {},
          h("dt", { text: "device_id" }), h("dd", { text: d.device_id }),
          h("dt", { text: "type" }), h("dd", { text: `${d.type_name} (${d.device_type ?? "?"})${d.max_power_w ? `, max ${watts(d.max_power_w)}` : ""}` }),
          h("dt", { text: "op mode" }), h("dd", { "data-field": "op_mode", text: `${d.op_mode_name} (${d.op_mode})` }),
          h("dt", { text: "address" }), h("dd", { text: d.address }),
          ...ident.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { text: v })]),
          h("dt", { text: "last read" }), h("dd", { text: ago(d.last_ok_at) }),
          h("dt", { text: "last error" }), h("dd", { class: d.last_error ? "error" : null, "data-field": "last_error", text: d.last_error ?? "none" }),
          ...((d.unavailable_points ?? []).length ? [h("dt", { text: "unavailable points" }), h("dd", { "data-field": "unavailable_points", text: d.unavailable_points.join(", ") })] : [])),
        h("div", { class: "table-wrap" }, h("table", { class: "metrics" }, h("tbody", {}, rows))),
        c ? h("div", {}, h("p", { class: "muted small", text: `${c.metric}, last 24 h (1-minute means); tap a metric for its chart` }), chart(c.points, c.metric)) : null);
    }));
  };
  every(2000, async () => {
    devices = (await api("devices")).devices;
    for (const d of devices) {
      selected[d.device_id] ??= "power_w" in d.metrics ? "power_w" : Object.keys(d.metrics)[0];
      const m = selected[d.device_id];
      const c = charts[d.device_id];
      if (m && (!c || c.metric !== m || Date.now() - c.at > 60_000)) await loadChart(d.device_id, m);
    }
    render();
  });
}

// ---- Buses ----
// One decimal under 10 %: a bus polled once a second over a fast link is busy well under 1 %.
const pct = (f) => (f < 0.1 ? `${(f * 100).toFixed(1)} %` : `${Math.round(f * 100)} %`);

function busesPage() {
  const body = h("tbody");
  view().append(h("h2", { text: "Buses" }), h("div", { class: "card table-wrap" }, h("table", { id: "bus-table" },
    h("thead", {}, h("tr", {}, ["Bus", "Utilisation", "Queue", "Requests", "Timeouts", "Failures", "Reconnects"].map((t, i) => h("th", { class: i === 3 || i >= 5 ? "opt" : null, text: t })))), body)),
    h("p", { class: "muted small", text: "Utilisation: share of wall time the bus was busy with a request since the previous look." }));
  every(2000, async () => {
    const { buses } = await api("buses");
    body.replaceChildren(...(buses.length ? buses.map((b) => h("tr", { "data-bus": b.bus },
      h("td", { text: b.bus }),
      h("td", { "data-field": "utilisation" }, b.utilisation === null ? "–" : h("span", {}, h("progress", { class: "util", max: 100, value: Math.round(b.utilisation * 100) }), ` ${pct(b.utilisation)}`)),
      h("td", { class: "num", text: b.queued }), h("td", { class: "num opt", text: b.requests }), h("td", { class: "num", text: b.timeouts }),
      h("td", { class: "num opt", text: b.failures }), h("td", { class: "num opt", text: b.reconnects }))) : [h("tr", {}, h("td", { colspan: 7, class: "muted", text: "no bus open yet" }))]));
  });
}

// ---- Events: timeline (-12 h .. +12 h) and table ----
/** An event's execution response in a table cell: status, delivered quantity, why. */
function resultCell(e) {
  const r = e.result, delivered = r?.details?.delivered_quantity, reason = r?.details?.reason;
  return [r ? badge(r.status) : "–", delivered !== undefined ? ` ${num(delivered)} ${e.event_unit}` : "", reason ? ` (${reason})` : ""];
}

function eventsPage() {
  const tl = h("div", { class: "card" });
  const body = h("tbody");
  view().append(h("h2", { text: "Dispatch events" }), tl, h("div", { class: "card table-wrap" }, h("table", { id: "event-table" },
    h("thead", {}, h("tr", {}, ["Event", "Source", "Type", "Quantity", "Window", "State", "Result"].map((t, i) => h("th", { class: i === 1 ? "opt" : null, text: t })))), body)));
  every(5000, async () => {
    const { events } = await api("events");
    const W = 800, now = Date.now(), t0 = now - 12 * 3600e3, t1 = now + 12 * 3600e3;
    const x = (t) => Math.max(0, Math.min(W, ((t - t0) / (t1 - t0)) * W));
    const shown = events.filter((e) => Date.parse(e.end_time) > t0 && Date.parse(e.start_time) < t1).slice(0, 12);
    const H = 30 + shown.length * 16;
    const svg = s("svg", { class: "timeline", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "events over the last and next 12 h" });
    shown.forEach((e, i) => svg.append(s("rect", { class: `ev ${e.event_type}`, x: x(Date.parse(e.start_time)), y: 4 + i * 16, width: Math.max(2, x(Date.parse(e.end_time)) - x(Date.parse(e.start_time))), height: 12, rx: 2 }, s("title", { text: `${e.event_type} ${e.event_quantity} ${e.event_unit}: ${e.state}` }))));
    svg.append(s("line", { class: "now", x1: x(now), y1: 0, x2: x(now), y2: H - 14 }), s("text", { x: 2, y: H - 2, text: "-12 h" }), s("text", { x: x(now), y: H - 2, "text-anchor": "middle", text: "now" }), s("text", { x: W - 2, y: H - 2, "text-anchor": "end", text: "+12 h" }));
    tl.replaceChildren(svg);
    body.replaceChildren(...(events.length ? events.map((e) => h("tr", { "data-event-id": e.event_id },
      h("td", {}, h("code", { text: e.event_id.slice(0, 8) }), e.mode === "test" ? h("span", { class: "muted small", text: " test" }) : null),
      h("td", { class: "opt", text: e.source }), h("td", { text: e.event_type }), h("td", { class: "num", text: `${e.event_quantity} ${e.event_unit}` }),
      h("td", { class: "small", text: `${time(e.start_time)} – ${new Date(e.end_time).toLocaleTimeString()}` }),
      h("td", {}, badge(e.state)),
      h("td", {}, ...resultCell(e)))) : [h("tr", {}, h("td", { colspan: 7, class: "muted", text: "no events" }))]));
  });
}

// ---- Uplink ----
function uplinkPage() {
  const box = h("div");
  view().append(h("h2", { text: "Uplink" }), box);
  every(2000, async () => {
    const u = await api("uplink");
    const kv = (rows) => h("dl", { class: "device" }, ...rows.flatMap(([k, v, id]) => [h("dt", { text: k }), h("dd", { id, text: v })]));
    box.replaceChildren(
      h("div", { class: "kpis" },
        h("div", { class: "kpi" }, h("span", { class: "muted small", text: "Messages waiting (delivery log)" }), h("b", { id: "outbox-depth", text: u.outbox.depth })),
        h("div", { class: "kpi" }, h("span", { class: "muted small", text: "Oldest message" }), h("b", { id: "outbox-age", text: u.outbox.age_s === null ? "–" : `${u.outbox.age_s} s` })),
        h("div", { class: "kpi" }, h("span", { class: "muted small", text: "Snapshots to push" }), h("b", { id: "push-pending", text: u.data_push.pending_snapshots })),
        h("div", { class: "kpi" }, h("span", { class: "muted small", text: "Samples dropped" }), h("b", { text: u.data_push.dropped_samples }))),
      ...u.lanes.map((l) => h("section", { class: "card device", "data-lane": l.lane }, h("h3", {}, l.lane, l.last_error && l.attempt > 0 ? badge("retrying", "bad") : badge("ok", "ok")),
        kv([["sent", String(l.sent)], ["failed attempts", String(l.failures)], ["last success", l.last_sent_at ? `${time(l.last_sent_at)} (${ago(l.last_sent_at)})` : "never"], ["last error", l.last_error ?? "none"]]))));
  });
}

// ---- Commissioning: scan a port, or read one device ----
function commissioningPage() {
  const err = h("p", { class: "error", id: "commission-error", role: "alert" });
  const prog = h("progress", { id: "commission-progress", max: 1, value: 0 });
  const progText = h("span", { class: "muted small", id: "commission-progress-text" });
  const out = h("div", { id: "commission-result" });
  const ep = (id) => h("label", {}, "Endpoint", h("input", { name: "endpoint", id, placeholder: "tcp://192.168.1.20:502 or rtu:/dev/ttyUSB0?baud=9600", required: true }));
  const scanForm = h("form", { class: "stack", id: "scan-form" }, ep("scan-endpoint"),
    h("div", { class: "row" }, h("label", {}, "From unit", h("input", { name: "from", id: "scan-from", value: "1", inputmode: "numeric" })), h("label", {}, "To unit", h("input", { name: "to", id: "scan-to", value: "247", inputmode: "numeric" })), h("label", {}, "Timeout ms", h("input", { name: "timeout_ms", id: "scan-timeout", value: "300", inputmode: "numeric" }))),
    h("button", { type: "submit", id: "scan-submit", text: "Scan" }));
  const readForm = h("form", { class: "stack", id: "read-form" }, ep("read-endpoint"),
    h("div", { class: "row" }, h("label", {}, "Unit", h("input", { name: "unit", id: "read-unit", value: "1", inputmode: "numeric" })), h("label", {}, "Profile", h("select", { name: "profile", id: "read-profile" }, (session?.profiles ?? []).map((p) => h("option", { value: p, selected: p === "sunspec", text: p }))))),
    h("button", { type: "submit", id: "read-submit", text: "Read device" }));
  view().append(h("h2", { text: "Commissioning" }),
    h("div", { class: "grid" }, h("section", { class: "card" }, h("h3", { text: "Scan a port" }), scanForm), h("section", { class: "card" }, h("h3", { text: "Read one device" }), readForm)),
    h("section", { class: "card" }, h("h3", { text: "Progress" }), err, prog, progText, out),
    h("p", { class: "muted small", text: "Same code as sitegate scan / sitegate read. An endpoint the gateway already polls is probed through its own bus queue." }));
  const buttons = [scanForm.querySelector("button"), readForm.querySelector("button")];
  const show = (job) => {
    if (!job) return;
    prog.max = job.total; prog.value = job.probed;
    progText.textContent = `${job.kind} ${job.endpoint}: ${job.probed}/${job.total}${job.kind === "scan" ? `, ${job.found.length} found` : ""} – ${job.state}`;
    if (job.error) err.textContent = job.error;
    const items = [];
    const named = (f) => (f.profiles === undefined ? "" : f.profiles.length ? `: profile ${f.profiles.join(" or ")}` : ": no profile matches");
    if (job.kind === "scan") items.push(h("ul", { id: "scan-found" }, job.found.map((f) => h("li", { "data-unit": f.unit, "data-profiles": (f.profiles ?? []).join(" "), text: `unit ${f.unit} answered (${f.answer})${named(f)}` }))));
    if (job.result) {
      const rows = [...Object.entries(job.result.device), ...Object.entries(job.result.metrics)];
      items.push(h("table", { id: "read-result" }, h("tbody", {}, rows.map(([k, v]) => h("tr", { "data-key": k }, h("td", { text: k }), h("td", { text: typeof v === "number" ? num(v) : v }))))));
    }
    out.replaceChildren(...items);
    buttons.forEach((b) => (b.disabled = job.state === "running"));
  };
  const follow = async () => {
    for (;;) {
      const { job } = await api("commission");
      show(job);
      if (!job || job.state !== "running") return;
      await new Promise((r) => setTimeout(r, 300));
    }
  };
  const submit = (form, path) => form.addEventListener("submit", async (e) => {
    e.preventDefault();
    err.textContent = "";
    const data = Object.fromEntries(new FormData(form));
    try {
      const { job } = await api(`commission/${path}`, { method: "POST", body: data });
      show(job);
      await follow();
    } catch (x) {
      err.textContent = x.message;
    }
  });
  submit(scanForm, "scan");
  submit(readForm, "read");
  follow().catch(() => {});
}

const PAGES = { "": overviewPage, devices: devicesPage, buses: busesPage, events: eventsPage, uplink: uplinkPage, commissioning: commissioningPage };

async function main() {
  session = await api("session");
  document.getElementById("site-id").textContent = session.site_id;
  document.getElementById("user").textContent = `(${session.user})`;
  document.getElementById("logout-csrf").value = session.csrf;
  for (const a of document.querySelectorAll("#nav a")) if (a.dataset.page === page) a.classList.add("active");
  document.title = `sitegate ${session.site_id} · ${page || "overview"}`;
  (PAGES[page] ?? overviewPage)();
}
main().catch((e) => status(`cannot load: ${e.message}`));
