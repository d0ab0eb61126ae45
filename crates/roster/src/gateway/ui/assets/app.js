// roster dashboard: keeps the page's <main> current without a reload. Every few seconds it
// asks for the same page's <main> again (X-Roster-Live) and swaps it in only when its stamp
// changed and nobody is typing in it. Everything works without this script; it adds no
// inline code and talks only to the dashboard's own origin (the page's CSP allows no other).
"use strict";
(function () {
  const PERIOD_MS = 2000;
  const main = document.getElementById("main");
  if (!main || !main.dataset.stamp) return;
  let busy = false;
  async function tick() {
    if (busy || document.visibilityState !== "visible") return;
    const focused = document.activeElement;
    if (focused && main.contains(focused) && focused.matches("input, select, textarea")) return;
    busy = true;
    try {
      const answer = await fetch(location.href, {
        headers: { "X-Roster-Live": "1" },
        credentials: "same-origin",
        cache: "no-store",
      });
      if (!answer.ok || answer.redirected) return;
      const stamp = answer.headers.get("X-Roster-Stamp");
      const unread = answer.headers.get("X-Roster-Unread");
      const badge = document.getElementById("nav-unread");
      if (badge && unread !== null && badge.textContent !== unread) badge.textContent = unread;
      if (!stamp || stamp === main.dataset.stamp) return;
      main.innerHTML = await answer.text();
      main.dataset.stamp = stamp;
    } catch (_) {
      // The gateway restarting or the network gone: the next tick tries again.
    } finally {
      busy = false;
    }
  }
  setInterval(tick, PERIOD_MS);
})();
