// session.js: the page's side of sign-in (loaded by the layout with the
// request's CSP nonce; no inline script anywhere).
//
// 1. CSRF: htmx requests carry the token from <meta name="csrf-token">
//    in the X-CSRF-Token header. Browsers that send Sec-Fetch-Site need
//    none, and the meta tag is then empty.
// 2. Session end: a live stream whose session was revoked sends
//    "session_ended" before it closes; the page then goes to the sign-in
//    form. A stream that fails asks /login/status, so an
//    expired session is noticed too.
(function () {
  "use strict";
  var meta = document.querySelector('meta[name="csrf-token"]');
  var token = meta ? meta.getAttribute("content") : "";

  function signIn() {
    var here = window.location.pathname + window.location.search;
    window.location.assign("/login?next=" + encodeURIComponent(here));
  }

  document.addEventListener("htmx:configRequest", function (e) {
    if (token) {
      e.detail.headers["X-CSRF-Token"] = token;
    }
  });

  document.addEventListener("htmx:sseOpen", function (e) {
    var source = e.detail && e.detail.source;
    if (source && !source.switchyardWatched) {
      source.switchyardWatched = true;
      source.addEventListener("session_ended", function () {
        source.close();
        signIn();
      });
    }
  });

  document.addEventListener("htmx:sseError", function () {
    fetch("/login/status", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (s) { if (!s.signed_in) { signIn(); } })
      .catch(function () { /* offline: the stream's own retry goes on */ });
  });
})();
