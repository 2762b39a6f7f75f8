// sluice console: the little the pages need beyond HTML. No framework, no
// build step; every page works without it (it only refreshes).
"use strict";

// A checkbox with data-autorefresh reloads the page every 5 s while
// checked; the choice is kept for the tab.
function autorefresh() {
  const box = document.querySelector("[data-autorefresh]");
  if (!box) return;
  box.checked = sessionStorage.getItem("sluice.autorefresh") === "1";
  let timer = null;
  const arm = () => {
    clearTimeout(timer);
    sessionStorage.setItem("sluice.autorefresh", box.checked ? "1" : "0");
    if (box.checked) timer = setTimeout(() => location.reload(), 5000);
  };
  box.addEventListener("change", arm);
  arm();
}

// A redrive's page polls its progress until it ends.
function followRedrive() {
  const bar = document.getElementById("redrive-progress");
  if (!bar || bar.dataset.running !== "true") return;
  const id = bar.dataset.redrive;
  const poll = async () => {
    let p;
    try {
      const res = await fetch("/ui/api/redrives/" + encodeURIComponent(id), { credentials: "same-origin" });
      p = await res.json();
      if (!res.ok) throw new Error(p.error || res.statusText);
    } catch (e) {
      document.getElementById("redrive-state").textContent = "unknown (" + e.message + ")";
      setTimeout(poll, 2000);
      return;
    }
    bar.max = Math.max(p.to_move, 1);
    bar.value = p.moved;
    document.getElementById("redrive-state").textContent = p.state + (p.error ? ": " + p.error : "");
    document.getElementById("redrive-moved").textContent = p.moved;
    document.getElementById("redrive-total").textContent = p.to_move;
    if (p.state === "running") setTimeout(poll, 500);
  };
  poll();
}

document.addEventListener("DOMContentLoaded", () => {
  autorefresh();
  followRedrive();
});
