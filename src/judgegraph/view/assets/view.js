// judgegraph view: the label queue's keys, and "compare" asking for exactly two runs. No conversation text is
// handled here: the server renders it, escaped.
"use strict";
(function () {
  const form = document.getElementById("runs-form");
  if (form) form.addEventListener("submit", (e) => {
    if (form.querySelectorAll("input[name=run]:checked").length !== 2) { e.preventDefault(); alert("Check two runs."); }
  });
  const q = document.getElementById("queue");
  if (!q) return;
  const d = q.dataset, n = Number(d.n), i = Number(d.i);
  const go = (to) => {
    const p = new URLSearchParams({run: d.run, annotator: d.annotator, strategy: d.strategy,
                                   i: String(Math.max(0, Math.min(to, n)))});
    if (d.reveal) p.set("reveal", "1");
    location.assign("/label?" + p.toString());
  };
  let busy = false;
  const label = async (value) => {
    if (busy || i >= n) return;
    busy = true;
    const status = document.getElementById("status");
    status.textContent = "saving…";
    const p = new URLSearchParams({run: d.run, strategy: d.strategy});
    const r = await fetch("/label?" + p.toString(), {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": d.csrf},
      body: JSON.stringify({annotator: d.annotator, label: value, i: i, key: JSON.parse(d.key)})});
    busy = false;
    if (!r.ok) { status.textContent = "not saved: " + (await r.text()); return; }
    go(d.reveal ? i : i + 1);  // with reveal, the page shows the judge's verdict; → goes on
  };
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const k = e.key;
    if (k === "y") label("yes");
    else if (k === "n") label("no");
    else if (k === "s" || k === "ArrowRight") go(i + 1);
    else if (k === "u" || k === "ArrowLeft") go(i - 1);
    else return;
    e.preventDefault();
  });
})();
