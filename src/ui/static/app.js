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

// ---- Devices: health, identity, live metrics, a chart per metric over what the history holds ----
/** A span in words: "45 s", "12 min", "3.5 h". */
function spanText(ms) {
  const s = Math.round(ms / 1000);
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(s < 36000 ? 1 : 0)} h`;
}

/**
 * A line of 1-minute means over the time the history holds (up to 24 h), not an empty 24 h
 * frame: the x axis runs from the first point to now (at least 2 min), the y axis from the
 * lowest to the highest value. The drawn range is on the svg (data-t0, data-t1, in ms).
 */
function chart(points, label) {
  const W = 400, H = 150, L = 48, B = 20;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img" });
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W, y2: H - B }), s("line", { class: "axis", x1: L, y1: 0, x2: L, y2: H - B }));
  if (!points.length) {
    svg.setAttribute("aria-label", `${label}: no data yet`);
    svg.append(s("text", { x: (W + L) / 2, y: H / 2, "text-anchor": "middle", text: "no data yet (one point per minute)" }));
    return svg;
  }
  const t1 = Math.max(Date.now(), points[points.length - 1][0] + 60e3);
  const t0 = Math.min(points[0][0], t1 - 120e3);
  svg.setAttribute("data-t0", String(t0));
  svg.setAttribute("data-t1", String(t1));
  svg.setAttribute("aria-label", `${label}, last ${spanText(t1 - t0)}`);
  for (let i = 0; i <= 3; i++) {
    const x = L + ((W - L) * i) / 3;
    svg.append(s("text", { x, y: H - 4, "text-anchor": i === 0 ? "start" : i === 3 ? "end" : "middle", text: i === 3 ? "now" : `-${spanText(((t1 - t0) * (3 - i)) / 3)}` }));
  }
  let lo = Math.min(...points.map((p) => p[1])), hi = Math.max(...points.map((p) => p[1]));
  if (hi === lo) { hi += 1; lo -= 1; }
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L);
  const y = (v) => 8 + (1 - (v - lo) / (hi - lo)) * (H - B - 16);
  svg.append(s("text", { x: L - 4, y: 14, "text-anchor": "end", text: num(hi) }), s("text", { x: L - 4, y: H - B, "text-anchor": "end", text: num(lo) }));
  const pts = points.length === 1 ? [points[0], [points[0][0] + 60e3, points[0][1]]] : points;
  svg.append(s("polyline", { points: pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ") }));
  return svg;
}

/** A code or reading in words, its number in the tooltip ("standby", title "device_op_mode 3"). */
function named(tag, attrs, words, what, code) {
  return h(tag, { ...attrs, text: words, title: `${what} ${code}`, "data-code": code, class: [attrs.class, "named"].filter(Boolean).join(" ") });
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
      const names = d.value_names ?? {};
      const rows = Object.entries(d.metrics).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) =>
        h("tr", { class: selected[d.device_id] === k ? "selected" : null, "data-metric": k, onclick: async () => { selected[d.device_id] = k; await loadChart(d.device_id, k); render(); } },
          h("td", { text: k }), names[k] === undefined ? h("td", { class: "num", text: num(v) }) : named("td", {}, names[k], k, v)));
      const c = charts[d.device_id];
      return h("section", { class: "card device", "data-device-id": d.device_id },
        h("h3", {}, d.name, badge(d.online ? "online" : "offline", d.online ? "ok" : "bad"), d.fully_configured ? null : badge("not fully configured", "bad")),
        h("dl", {},
          h("dt", { text: "device_id" }), h("dd", { text: d.device_id }),
          h("dt", { text: "type" }), h("dd", {}, named("span", { "data-field": "device_type" }, d.type_name, "device_type", d.device_type ?? "?"), d.max_power_w ? `, max ${watts(d.max_power_w)}` : ""),
          h("dt", { text: "op mode" }), named("dd", { "data-field": "op_mode" }, d.op_mode_name, "device_op_mode", d.op_mode),
          h("dt", { text: "address" }), h("dd", { text: d.address }),
          ...ident.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { text: v })]),
          h("dt", { text: "last read" }), h("dd", { text: ago(d.last_ok_at) }),
          h("dt", { text: "last error" }), h("dd", { class: d.last_error ? "error" : null, "data-field": "last_error", text: d.last_error ?? "none" }),
          ...((d.unavailable_points ?? []).length ? [h("dt", { text: "unavailable points" }), h("dd", { "data-field": "unavailable_points", text: d.unavailable_points.join(", ") })] : [])),
        h("div", { class: "table-wrap" }, h("table", { class: "metrics" }, h("tbody", {}, rows))),
        c ? h("div", {}, h("p", { class: "muted small", text: `${c.metric}: 1-minute means over what the last 24 h hold; tap a metric for its chart` }), chart(c.points, c.metric)) : null);
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

// ---- Events: a timeline zoomed to the events, and the table ----
/** An event's execution response in a table cell: status, delivered quantity, why it ended. */
function resultCell(e) {
  const r = e.result, delivered = r?.details?.delivered_quantity, reason = r?.details?.reason;
  return [r ? badge(r.status) : "–", delivered !== undefined ? ` ${num(delivered)} ${e.event_unit}` : "", reason && reason !== "missed" ? ` (${reason})` : "",
    e.end_reason ? h("div", { class: "small end-reason", "data-field": "end_reason", text: e.end_reason }) : null];
}

/** The window as planned, and when the event really ended when that was earlier. */
function windowCell(e) {
  const end = new Date(e.end_time).toLocaleTimeString();
  const early = e.ended_at && Date.parse(e.ended_at) < Date.parse(e.end_time) - 1000;
  return early ? `${time(e.start_time)} – ${new Date(e.ended_at).toLocaleTimeString()} (planned to ${end})` : `${time(e.start_time)} – ${end}`;
}

/** A clock time on the timeline's axis: hh:mm, with seconds when the range is short. */
const clock = (t, span) => new Date(t).toLocaleTimeString([], span < 600e3 ? { hour: "2-digit", minute: "2-digit", second: "2-digit" } : { hour: "2-digit", minute: "2-digit" });

/**
 * The events of the last and next 24 h (at most 12) on an axis that spans them, not a fixed
 * +-12 h: from the first start to the last end, 5 % to each side, at least 2 min; "now" is in
 * range when it is near (within one span), else named at the edge. The drawn range is on the
 * svg (data-t0, data-t1, in ms); drawn in CSS pixels, so its labels are as big as the page's.
 */
function timeline(events, width) {
  const now = Date.now();
  const shown = events.filter((e) => Date.parse(e.end_time) > now - 24 * 3600e3 && Date.parse(e.start_time) < now + 24 * 3600e3).slice(0, 12);
  const W = Math.max(280, Math.round(width)), H = 34 + Math.max(1, shown.length) * 18;
  const svg = s("svg", { class: "timeline", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img" });
  if (!shown.length) {
    svg.setAttribute("aria-label", "no events in the last or next 24 h");
    svg.append(s("text", { x: W / 2, y: 16, "text-anchor": "middle", text: "no events in the last or next 24 h" }));
    return svg;
  }
  const ends = (e) => (e.ended_at ? Math.min(Date.parse(e.ended_at), Date.parse(e.end_time)) : Date.parse(e.end_time));
  let t0 = Math.min(...shown.map((e) => Date.parse(e.start_time))), t1 = Math.max(...shown.map((e) => Date.parse(e.end_time)));
  const span = Math.max(t1 - t0, 120e3);
  if (now >= t0 - span && now <= t1 + span) { t0 = Math.min(t0, now); t1 = Math.max(t1, now); }
  const pad = Math.max(t1 - t0, 120e3) * 0.05;
  t0 -= pad; t1 += pad;
  svg.setAttribute("data-t0", String(Math.round(t0)));
  svg.setAttribute("data-t1", String(Math.round(t1)));
  svg.setAttribute("aria-label", `${shown.length} events from ${clock(t0, t1 - t0)} to ${clock(t1, t1 - t0)}`);
  const x = (t) => Math.max(0, Math.min(W, ((t - t0) / (t1 - t0)) * W));
  shown.forEach((e, i) => {
    const a = x(Date.parse(e.start_time)), b = x(Date.parse(e.end_time)), c = x(ends(e));
    // The planned window as an outline; filled as far as the event ran (nothing for one cancelled before its start).
    svg.append(s("rect", { class: "ev planned", "data-event-id": e.event_id, x: a, y: 4 + i * 18, width: Math.max(4, b - a), height: 14, rx: 2 },
      s("title", { text: `${e.event_type} ${e.event_quantity} ${e.event_unit}: ${e.end_reason ?? e.state}` })));
    if (e.state !== "scheduled" && !(e.ended_at && Date.parse(e.ended_at) <= Date.parse(e.start_time)))
      svg.append(s("rect", { class: `ev ran ${e.event_type}`, x: a, y: 4 + i * 18, width: Math.max(4, Math.min(c, x(now)) - a), height: 14, rx: 2 }));
    svg.append(s("text", { class: "ev-label", x: Math.min(a + 4, W - 4), y: 15 + i * 18, "text-anchor": a + 4 > W - 60 ? "end" : "start", text: `${e.event_type} ${e.event_quantity} ${e.event_unit}` }));
  });
  const base = H - 16;
  svg.append(s("line", { class: "axis", x1: 0, y1: base, x2: W, y2: base }));
  // The ends' clock times, and "now" where it is; an end label too close to "now" gives way to it.
  const nowIn = now >= t0 && now <= t1;
  if (!nowIn || x(now) > 80) svg.append(s("text", { x: 2, y: H - 2, text: clock(t0, t1 - t0) }));
  if (!nowIn || x(now) < W - 80) svg.append(s("text", { x: W - 2, y: H - 2, "text-anchor": "end", text: clock(t1, t1 - t0) }));
  if (nowIn) svg.append(s("line", { class: "now", x1: x(now), y1: 0, x2: x(now), y2: base }), s("text", { x: Math.max(14, Math.min(W - 14, x(now))), y: H - 2, "text-anchor": "middle", text: "now" }));
  else svg.append(s("text", { x: W / 2, y: H - 2, "text-anchor": "middle", text: now > t1 ? `now: ${spanText(now - t1)} later →` : `← now: ${spanText(t0 - now)} earlier` }));
  return svg;
}

function eventsPage() {
  const tl = h("div", { class: "card", id: "event-timeline" });
  const body = h("tbody");
  view().append(h("h2", { text: "Dispatch events" }), tl, h("div", { class: "card table-wrap" }, h("table", { id: "event-table" },
    h("thead", {}, h("tr", {}, ["Event", "Source", "Type", "Quantity", "Window", "State", "Result"].map((t, i) => h("th", { class: i === 1 ? "opt" : null, text: t })))), body)));
  every(5000, async () => {
    const { events } = await api("events");
    tl.replaceChildren(timeline(events, tl.clientWidth - 34));
    body.replaceChildren(...(events.length ? events.map((e) => h("tr", { "data-event-id": e.event_id },
      h("td", {}, h("code", { text: e.event_id.slice(0, 8) }), e.mode === "test" ? h("span", { class: "muted small", text: " test" }) : null),
      h("td", { class: "opt", text: e.source }), h("td", { text: e.event_type }), h("td", { class: "num", text: `${e.event_quantity} ${e.event_unit}` }),
      h("td", { class: "small", text: windowCell(e) }),
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
    // The words come with the job (the same as `sitegate scan`'s); the raw answer is in the tooltip.
    if (job.kind === "scan") items.push(h("ul", { id: "scan-found" }, job.found.map((f) => h("li", { "data-unit": f.unit, "data-profiles": (f.profiles ?? []).join(" "), title: `answered with ${f.answer}`, text: f.words ?? `unit ${f.unit}: answers` }))));
    if (job.result) {
      const labels = job.result.labels ?? {};
      const cell = (k, v) => (labels[k] !== undefined ? named("td", {}, labels[k], k, v) : h("td", { text: typeof v === "number" ? num(v) : v }));
      const rows = [...Object.entries(job.result.device), ...Object.entries(job.result.metrics)];
      items.push(h("table", { id: "read-result" }, h("tbody", {}, rows.map(([k, v]) => h("tr", { "data-key": k }, h("td", { text: k }), cell(k, v))))));
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
