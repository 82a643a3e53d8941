// The board's only script: listen to /events and, when a run this page shows has changed,
// fetch this page again and swap in its live sections (no reload, no framework). The
// browser's EventSource reconnects by itself and sends Last-Event-ID, the store's change
// cursor, so the server replays whatever changed while it was away.
(function () {
  "use strict";
  var body = document.body;
  var cursor = body.getAttribute("data-cursor");
  var run = body.getAttribute("data-run");
  var status = document.getElementById("stream-status");
  if (!cursor || !window.EventSource) {
    if (status) { status.textContent = ""; }
    return;
  }

  function say(state, text) {
    if (status) { status.setAttribute("data-state", state); status.textContent = text; }
  }

  var fetching = false;
  var again = false;

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var live = document.querySelectorAll("[data-live]");
    for (var i = 0; i < live.length; i++) {
      var old = live[i];
      if (old.contains(document.activeElement) && document.activeElement !== document.body) {
        continue;  // someone is typing a reason here: leave the form alone
      }
      var next = fresh.getElementById(old.id);
      if (next) { old.replaceWith(document.adoptNode(next)); } else { old.remove(); }
    }
    var added = fresh.querySelectorAll("[data-live]");
    var main = document.querySelector("main");
    for (var j = 0; j < added.length; j++) {
      if (!document.getElementById(added[j].id) && main) {
        main.appendChild(document.adoptNode(added[j]));
      }
    }
  }

  function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(swap)
      .catch(function () { say("closed", "could not refresh: reload the page"); })
      .then(function () {
        fetching = false;
        if (again) { again = false; refresh(); }
      });
  }

  var source = new EventSource("/events?after=" + encodeURIComponent(cursor));
  source.addEventListener("open", function () { say("live", "live"); });
  source.addEventListener("error", function () {
    if (source.readyState === EventSource.CLOSED) {
      say("closed", "stream closed: sign in again or reload");
    } else {
      say("connecting", "reconnecting…");
    }
  });
  source.addEventListener("runs", function (event) {
    var changed = JSON.parse(event.data).runs || [];
    body.setAttribute("data-cursor", event.lastEventId);
    var mine = !run || changed.some(function (r) { return r.id === run; });
    if (mine) { refresh(); }
  });
  source.addEventListener("tick", refresh);  // liveness and age move with time alone
  source.addEventListener("closed", function () {
    source.close();
    say("closed", "stream closed: sign in again or reload");
  });
})();
