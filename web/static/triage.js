// triage.js: the triage pages' side of the triage socket (/ws; protocol
// in internal/ws/protocol.go). An ES module loaded with the request's CSP
// nonce; no framework, no build step, no inline script: it reads the page
// from its data-* attributes and writes text only (textContent), so
// nothing a person typed is ever parsed as HTML.
//
// - Live state: the server pushes each item's newest state; the page
//   applies only versions newer than the one it holds.
// - Optimistic mutations: a click shows its effect at once as an overlay
//   over the last confirmed state ("Claiming…", a greyed note); the ack
//   replaces it with the canonical state, a reject removes it and shows
//   why. The mutation id is made once per click: a resend after a
//   reconnect (or over the HTTP fallback) gets the same stored answer.
// - Resync: on every (re)connect and whenever a hidden tab becomes
//   visible, the page says hello and gets everything it shows again.
// - Beside the triage pages ("board", "item"), a page that shows items
//   elsewhere includes a hidden root (templates.TriageLive): "looking" on
//   the page of the failure one item tracks (its visitor counts as
//   looking at the item), "list" for rows of items (the visitor looks at
//   none); their items anywhere in the document stay live, and rows that
//   htmx swaps in are read again.
// - Reconnects back off exponentially (with jitter) up to 10 s; a socket
//   closed because the session ended (4401) takes the page to sign-in.
const root = document.getElementById("triage");
if (root) {
  start(root);
}

function start(root) {
  const view = root.dataset.triageView;
  const elsewhere = view === "looking" || view === "list";
  const scope = elsewhere ? document : root; // where the items are
  const me = root.dataset.triageMe || "";
  const meta = document.querySelector('meta[name="csrf-token"]');
  const csrf = meta ? meta.getAttribute("content") : "";
  const versions = new Map(); // item id → confirmed version
  const pending = new Map(); // mutation id → {m, el, note, body}
  let items = [];
  let sock = null;
  let backoff = 500;
  let refreshing = false;
  let again = false; // a refresh was asked for while one ran

  readItems();
  connect();
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) {
      if (sock && sock.readyState === WebSocket.OPEN) {
        hello();
      } else if (!sock) {
        connect();
      }
    }
  });
  root.addEventListener("click", (e) => {
    const b = e.target.closest("[data-op]");
    if (b) {
      mutate(b.closest("[data-item-id]") || root.querySelector("[data-item-id]"), b.dataset.op);
    }
  });
  root.addEventListener("change", (e) => {
    if (e.target.matches("select[data-arg]")) {
      e.target.dataset.picked = ""; // see choices
    }
  });
  setInterval(heartbeat, 60000);
  if (elsewhere) {
    document.body.addEventListener("htmx:afterSettle", (e) => {
      if (e.target.matches("[data-item-id]") || e.target.querySelector("[data-item-id]")) {
        readItems();
        hello();
      }
    });
  }

  function readItems() {
    items = [];
    scope.querySelectorAll("[data-item-id]").forEach((el) => {
      const id = Number(el.dataset.itemId);
      items.push(id);
      versions.set(id, Number(el.dataset.version));
    });
  }

  function connect() {
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
    const s = new WebSocket(url);
    sock = s;
    status("Connecting…");
    s.onopen = () => {
      backoff = 500;
      status("Live");
      hello();
      for (const p of pending.values()) {
        send(p.m);
      }
    };
    s.onmessage = (e) => handle(JSON.parse(e.data));
    s.onclose = (e) => {
      if (sock === s) {
        sock = null;
      }
      if (e.code === 4401) {
        location.assign("/login?next=" + encodeURIComponent(location.pathname + location.search));
        return;
      }
      status("Reconnecting…");
      const delay = Math.min(backoff, 10000) * (0.5 + Math.random() / 2);
      backoff *= 2;
      setTimeout(connect, delay);
    };
  }

  function send(m) {
    if (sock && sock.readyState === WebSocket.OPEN) {
      sock.send(JSON.stringify(m));
      return true;
    }
    return false;
  }

  function hello() {
    send({ type: "hello", view: view === "looking" ? "item" : view, items: items.slice(0, 500) });
  }

  function handle(m) {
    switch (m.type) {
      case "state":
        m.items.forEach(applyState);
        break;
      case "answer":
        settle(m.answer);
        break;
      case "presence":
        for (const [v, names] of Object.entries(m.views)) {
          document.querySelectorAll('[data-presence="' + v + '"]').forEach((el) => {
            el.textContent = names.length ? names.join(", ") : "nobody";
          });
        }
        break;
      case "resync":
        hello();
        break;
      case "heartbeat":
        if (!m.ok) {
          error("Your claim has ended: someone else may have taken it.");
        }
        break;
      case "error":
        error(m.message);
        break;
    }
  }

  // applyState shows it if it is newer than what the page holds. An item
  // the board does not show yet (new, or moved between columns) makes the
  // board read itself again.
  function applyState(it) {
    const held = versions.get(it.id);
    if (held !== undefined && it.version <= held) {
      return;
    }
    if (held === undefined) {
      if (view === "board") {
        refresh();
      }
      return;
    }
    versions.set(it.id, it.version);
    let moved = false;
    document.querySelectorAll('[data-item-id="' + it.id + '"]').forEach((el) => {
      const shown = el.querySelector('[data-field="status"]');
      moved = moved || (shown && shown.textContent !== it.status);
      render(el, it);
    });
    if (view === "item" || (view === "board" && moved)) {
      refresh();
    }
  }

  function render(el, it) {
    el.dataset.version = String(it.version);
    const st = el.querySelector('[data-field="status"]');
    if (st) {
      st.textContent = it.status;
      st.className = "badge status-" + it.status;
    }
    text(el, "assignee", it.assignee || "nobody");
    const live = it.claim_holder && Date.parse(it.claim_expires_at) > Date.now();
    text(el, "claim", live ? it.claim_holder + " until " + new Date(it.claim_expires_at).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "unclaimed");
  }

  function text(el, field, value) {
    const f = el.querySelector('[data-field="' + field + '"]');
    if (f) {
      f.textContent = value;
    }
  }

  function mutate(el, op) {
    if (!el) {
      return;
    }
    const id = Number(el.dataset.itemId);
    const args = {};
    let overlay = { claim: "Claiming…", release: "Releasing…", status: "Setting status…", assign: "Assigning…", note: "Adding note…", replay: "Replaying…" }[op];
    if (op === "status") {
      args.status = root.querySelector('[data-arg="status"]').value;
    } else if (op === "assign") {
      args.assignee = root.querySelector('[data-arg="assignee"]').value.trim();
    } else if (op === "note") {
      const ta = root.querySelector('[data-arg="body"]');
      args.body = ta.value;
      if (!args.body.trim()) {
        return;
      }
      ta.value = "";
    } else if (op === "claim") {
      const holder = (el.querySelector('[data-field="claim"]') || {}).textContent || "";
      if (holder !== "unclaimed" && !holder.startsWith(me + " until")) {
        const reason = window.prompt("Take over this claim? Say why:");
        if (!reason) {
          return;
        }
        args.takeover = true;
        args.reason = reason;
        overlay = "Taking over…";
      }
    }
    const m = { type: "mutate", mutation_id: uuid(), item: id, op: op, args: args, seen_version: versions.get(id) };
    const p = { m: m, el: el, note: null, body: args.body };
    if (op === "note") {
      p.note = pendingNote(args.body);
    }
    el.classList.add("pending");
    const ov = el.querySelector("[data-overlay]");
    if (ov) {
      ov.textContent = overlay;
    }
    error("");
    pending.set(m.mutation_id, p);
    if (!send(m)) {
      fallback(m);
    }
  }

  function pendingNote(body) {
    const list = document.querySelector('[data-region="notes"]');
    if (!list) {
      return null;
    }
    const li = document.createElement("li");
    li.className = "note pending";
    li.dataset.testid = "note-pending";
    const meta = document.createElement("p");
    meta.className = "note-meta muted";
    meta.textContent = (me || "you") + " · sending…";
    const b = document.createElement("p");
    b.className = "note-body";
    b.textContent = body;
    li.append(meta, b);
    list.append(li);
    return li;
  }

  // settle ends a pending mutation with its answer: an ack shows the
  // canonical state, a reject rolls the overlay back and says why.
  function settle(a) {
    const p = pending.get(a.mutation_id);
    if (!p) {
      return;
    }
    pending.delete(a.mutation_id);
    p.el.classList.remove("pending");
    const ov = p.el.querySelector("[data-overlay]");
    if (ov) {
      ov.textContent = "";
    }
    if (p.note) {
      // Acked or not, the pending copy goes: the page reads the notes
      // again below (an ack whose state the feed already brought would
      // not), and a refused note goes back into the form.
      p.note.remove();
      const ta = root.querySelector('[data-arg="body"]');
      if (!a.ok && ta && !ta.value) {
        ta.value = p.body;
      }
    }
    if (!a.ok) {
      error((a.message || a.reason) + (a.holder ? " (held by " + a.holder + ")" : ""));
    }
    if (a.item) {
      applyState(a.item);
    }
    if (p.note && a.ok) {
      refresh();
    }
  }

  // fallback posts a mutation over HTTP while the socket is down; the
  // same mutation id returns the same stored answer, so the resend after
  // the socket is back is harmless.
  function fallback(m) {
    fetch("/triage/mutations", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Idempotency-Key": m.mutation_id, "X-CSRF-Token": csrf },
      body: JSON.stringify(m),
    })
      .then((r) => r.json())
      .then(settle)
      .catch(() => {}); // still pending: resent when the socket is back
  }

  // refresh reads the page again and swaps its server-rendered regions
  // (the board; an item's notes and history), keeping pending notes.
  function refresh() {
    if (refreshing) {
      again = true; // what it fetched may predate the change: read once more after it
      return;
    }
    refreshing = true;
    again = false;
    fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then((r) => r.text())
      .then((html) => {
        const doc = new DOMParser().parseFromString(html, "text/html");
        const selectors = view === "board" ? ["#triage"] : ['[data-region="notes"]', '[data-region="history"]', '[data-region="statuses"]'];
        for (const sel of selectors) {
          const fresh = doc.querySelector(sel);
          const cur = document.querySelector(sel);
          if (fresh && cur) {
            const chosen = choices(cur);
            cur.replaceChildren(...Array.from(fresh.childNodes, (n) => document.importNode(n, true)));
            restore(cur, chosen);
          }
        }
        for (const p of pending.values()) {
          if (p.note) {
            const list = document.querySelector('[data-region="notes"]');
            if (list) {
              list.append(p.note);
            }
          }
        }
        if (view === "board") {
          readItems();
          hello();
        }
      })
      .catch(() => {})
      .finally(() => {
        refreshing = false;
        if (again) {
          refresh();
        }
      });
  }

  // choices are the values the operator picked in the selects of el
  // (the status to set); restore picks them again in el's fresh copy
  // where it still offers them. A refresh may land between picking a
  // status and clicking "Set status" (after the operator's own note, it
  // reads the page twice): without this, the click would send the
  // fresh select's first status instead of the one picked.
  function choices(el) {
    return Array.from(el.querySelectorAll("select[data-arg][data-picked]"), (s) => [s.dataset.arg, s.value]);
  }

  function restore(el, chosen) {
    for (const [arg, value] of chosen) {
      const s = el.querySelector('select[data-arg="' + arg + '"]');
      if (s && Array.from(s.options).some((o) => o.value === value)) {
        s.value = value;
        s.dataset.picked = "";
      }
    }
  }

  function heartbeat() {
    if (view !== "item" || !me) {
      return;
    }
    const el = root.querySelector("[data-item-id]");
    const claim = el && el.querySelector('[data-field="claim"]');
    if (claim && claim.textContent.startsWith(me + " until")) {
      send({ type: "heartbeat", item: Number(el.dataset.itemId) });
    }
  }

  function status(s) {
    document.querySelectorAll("[data-conn]").forEach((el) => {
      el.textContent = s;
    });
  }

  function error(s) {
    document.querySelectorAll("[data-error]").forEach((el) => {
      el.textContent = s;
    });
  }
}

function uuid() {
  if (crypto.randomUUID) {
    return crypto.randomUUID();
  }
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return h.slice(0, 8) + "-" + h.slice(8, 12) + "-" + h.slice(12, 16) + "-" + h.slice(16, 20) + "-" + h.slice(20);
}
