// messages.js: when the message list's "N new" control asks the server.
// Loaded as a module with the page's CSP nonce, after htmx.
//
// Enqueues are not on the change feed (the hot path sends no NOTIFY), so
// the control listens to the statistics stream instead: the statistics
// leader ticks once per cluster, and each stats event carries the newest
// outbox id and the latest delivery's time (microseconds since the epoch).
// The control compares the one its list is ordered by (data-new-by: the
// delivered list shows the latest delivery first) with the list's first
// row's (data-new-above), and asks /messages/new only when the newest is
// past it, at most once per MIN_GAP_MS, with a trailing ask so the last
// event of a burst is not lost. A newest value that did not move since the
// last ask is asked again only every RECHECK_MS: a message that committed
// late under an id (or a delivery time) below the newest still shows,
// while a draining backlog (stats change, the newest id does not) costs no
// requests, nor, on the delivered list, do enqueues and retries (stats
// change, the latest delivery does not). The stream's (re)connect and a
// tab becoming visible ask too.
// Once the control shows the cap ("100+ new"), nothing more is asked: the
// count cannot grow past it until the reader follows the link.

const MIN_GAP_MS = 1000;
const RECHECK_MS = 10000;

let lastAsk = 0; // Date.now() of the last request
let askedNewest = -1; // the newest value the last request was made for
let seenNewest = -1; // the newest value of the latest stats event
let trailing = null; // the timer of a deferred ask

function newestOf(event, field) {
  try {
    const v = JSON.parse(event.detail.data).payload[field];
    return Number.isInteger(v) ? v : null;
  } catch {
    return null;
  }
}

document.body.addEventListener("htmx:confirm", (e) => {
  const el = e.detail.elt;
  if (!el || !el.dataset || el.dataset.newAbove === undefined) return;
  if (el.querySelector("[data-capped]")) {
    e.preventDefault();
    return;
  }
  const trigger = e.detail.triggeringEvent;
  if (trigger && trigger.type === "sse:stats") {
    const newest = newestOf(trigger, el.dataset.newBy || "newest_outbox_id");
    // An event without the value (a leader of an older version) asks,
    // throttled.
    if (newest !== null) {
      seenNewest = newest;
      const moved = newest !== askedNewest || Date.now() - lastAsk >= RECHECK_MS;
      if (newest <= Number(el.dataset.newAbove) || !moved) {
        e.preventDefault();
        return;
      }
    }
  }
  const wait = lastAsk + MIN_GAP_MS - Date.now();
  if (wait > 0) {
    e.preventDefault();
    if (trailing === null) {
      trailing = window.setTimeout(() => {
        trailing = null;
        window.htmx.trigger(el, "messages:check");
      }, wait);
    }
    return;
  }
  lastAsk = Date.now();
  askedNewest = seenNewest;
});
