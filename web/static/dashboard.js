// dashboard.js: the dashboard's charts (uPlot), and fresh reads for the
// refreshes that follow a lost stream or a hidden tab. Loaded as a module
// with the page's CSP nonce;
// htmx and uPlot are loaded before it (deferred classic scripts run first).

const charts = new Map();

function series() {
  const el = document.getElementById("dash-series");
  if (!el || !el.dataset.series) return null;
  try {
    return JSON.parse(el.dataset.series);
  } catch {
    return null;
  }
}

function width(el) {
  return Math.max(280, Math.floor(el.clientWidth || el.parentElement.clientWidth || 600));
}

// The console shows every time in UTC, as "2006-01-02 15:04:05": the
// charts' axes and legends do too, whatever the browser's time zone.
const utc = (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC");
const timeSeries = { label: "UTC", value: "{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}" };
let clock = null;
const timeAxis = {
  values: (u, splits) => {
    clock = clock || uPlot.fmtDate("{HH}:{mm}");
    return splits.map((ts) => clock(utc(ts)));
  },
};

// showLatest puts the newest second's values in the legend, so they are
// readable without hovering; a hover shows the hovered second instead.
function showLatest(u) {
  if (u.cursor.idx != null) return;
  const ys = u.data[1] || [];
  for (let i = ys.length - 1; i >= 0; i--) {
    if (ys[i] != null) {
      u.setLegend({ idx: i });
      return;
    }
  }
}

function chart(id, opts, data) {
  const el = document.getElementById(id);
  if (!el || typeof uPlot === "undefined") return;
  let c = charts.get(id);
  if (!c || !el.contains(c.root)) {
    el.replaceChildren();
    c = new uPlot({
      ...opts, width: width(el), height: 200, tzDate: utc,
      series: [timeSeries, ...opts.series],
      axes: [timeAxis, {}],
      hooks: { setCursor: [showLatest] },
    }, data, el);
    charts.set(id, c);
  } else {
    c.setData(data);
  }
  showLatest(c);
}

function draw() {
  const s = series();
  // A snapshot without a series yet (a leader's first, empty one) has
  // nothing to draw.
  if (!s || !Array.isArray(s.delivered)) return;
  const n = s.delivered.length;
  const xs = new Array(n);
  const rate = new Array(n);
  for (let i = 0; i < n; i++) {
    xs[i] = s.start + i;
    const attempts = s.delivered[i] + s.retried[i] + s.dead[i];
    rate[i] = attempts > 0 ? (100 * (s.retried[i] + s.dead[i])) / attempts : null;
  }
  chart("chart-throughput", {
    scales: { x: { time: true } },
    series: [
      { label: "delivered/s", stroke: "#17652f", fill: "rgba(23,101,47,0.08)" },
      { label: "retried/s", stroke: "#b7791f" },
      { label: "dead/s", stroke: "#a3231b" },
    ],
  }, [xs, s.delivered, s.retried, s.dead]);
  chart("chart-failures", {
    scales: { x: { time: true }, y: { range: [0, 100] } },
    series: [{ label: "failure %", stroke: "#a3231b", spanGaps: false }],
  }, [xs, rate]);
}

// A read of the region is owed fresh from the moment the stream
// (re)connects, asks for a resync or the tab's visibility changes, until a
// request carries fresh=1: the read those events trigger may not be the
// one sent. While another read of the region is in flight, htmx queues
// only the last trigger, so a stats event right after the stream's ready
// event took its place, and its read, served from the cached snapshot,
// asked for no fresh one (seen in CI when the 10 s poll was in flight as
// a restarted console's stream came back). Listening in the capture phase
// owes the read before htmx handles the event.
let freshOwed = false;
function oweFresh(e) {
  if (e.type === "visibilitychange" || (e.target && e.target.id === "dash-live")) freshOwed = true;
}
document.body.addEventListener("sse:ready", oweFresh, true);
document.body.addEventListener("sse:resync", oweFresh, true);
document.addEventListener("visibilitychange", oweFresh, true);

// A read owed fresh asks for one; one caused by a stats event asks for at
// least the version the event announced, so that no cache serves an older
// one.
document.body.addEventListener("htmx:configRequest", (e) => {
  if (!e.detail.elt || e.detail.elt.id !== "dash-live") return;
  if (freshOwed) {
    freshOwed = false;
    e.detail.parameters.fresh = "1";
    return;
  }
  const trigger = e.detail.triggeringEvent;
  if (!trigger || trigger.type !== "sse:stats" || !trigger.detail || !trigger.detail.data) return;
  try {
    const v = JSON.parse(trigger.detail.data).payload.version;
    if (Number.isInteger(v)) e.detail.parameters.v = String(v);
  } catch {
    // an event without a version: the cached snapshot will do
  }
});

document.body.addEventListener("htmx:afterSettle", (e) => {
  if (e.target && e.target.id === "dash-live") draw();
});

window.addEventListener("resize", () => {
  for (const [id, c] of charts) {
    const el = document.getElementById(id);
    if (el) c.setSize({ width: width(el), height: 200 });
  }
});

draw();
