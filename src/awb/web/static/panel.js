// Agent Workbench panel: live toasts from the workbench's events (Server-Sent Events). No framework,
// no build step; every page works without this script, it only adds the live part.
(function () {
  "use strict";
  var TOAST_MS = 8000;
  var MAX_TOASTS = 5;

  function showToast(toast) {
    var region = document.getElementById("toasts");
    if (!region) return;
    var item = document.createElement("div");
    item.className = "toast tone-" + (toast.tone || "info");
    // The region is a polite live region already; only a rejection interrupts.
    if (toast.tone === "error") item.setAttribute("role", "alert");
    var text = document.createElement("span");
    text.textContent = toast.text;  // never innerHTML: tool names come from agents
    var close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "×";
    close.addEventListener("click", function () { item.remove(); });
    item.appendChild(text);
    item.appendChild(close);
    region.appendChild(item);
    while (region.children.length > MAX_TOASTS) region.firstChild.remove();
    setTimeout(function () { item.remove(); }, TOAST_MS);
  }

  function markStale(payload) {
    // The tools list is out of date once the inventory changed: say so, and offer a refresh.
    if (!document.getElementById("tools") && !document.querySelector(".empty")) return;
    if (payload.kind === "craft_started" || payload.kind === "craft_rejected") return;
    var bar = document.getElementById("stale");
    if (bar) return;
    bar = document.createElement("p");
    bar.id = "stale";
    bar.className = "notice";
    var link = document.createElement("a");
    link.href = window.location.pathname + window.location.search;
    link.textContent = "The inventory changed: refresh the list";
    bar.appendChild(link);
    var main = document.getElementById("main");
    main.insertBefore(bar, main.firstChild);
  }

  function connect(url) {
    if (!window.EventSource) return;
    var state = document.getElementById("live-state");
    var source = new EventSource(url);
    source.addEventListener("open", function () {
      if (state) { state.classList.add("on"); state.title = "Live updates: connected"; }
      document.body.dataset.stream = "open";
    });
    source.addEventListener("error", function () {
      // CLOSED: the browser gave up (the server answered with a page, such as the sign-in page after a
      // sign-out in another tab); otherwise it reconnects by itself.
      var closed = source.readyState === EventSource.CLOSED;
      if (state) { state.classList.remove("on"); state.title = closed ? "Live updates: off" : "Live updates: reconnecting"; }
      if (closed) document.body.dataset.stream = "closed";
    });
    source.addEventListener("signed_out", function (message) {
      // This sign-in ended (Sign out here or in another tab, or it expired): stop listening, and leave
      // the page for the sign-in page rather than reconnecting.
      source.close();
      document.body.dataset.stream = "signed_out";
      var target = "/login";
      try { target = JSON.parse(message.data).sign_in || target; } catch (e) { /* the default will do */ }
      var here = window.location.pathname + window.location.search;
      window.location.assign(here === "/" ? target : target + "?next=" + encodeURIComponent(here));
    });
    source.addEventListener("workbench", function (message) {
      var payload = JSON.parse(message.data);
      if (payload.toast) showToast(payload.toast);
      if (window.location.pathname === "/") markStale(payload);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var url = document.body.dataset.live;
    if (url) connect(url);
  });
})();
