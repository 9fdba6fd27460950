// judgegraph HTML report. Every piece of conversation content is set with
// textContent (never innerHTML): a reply containing markup shows as text.
"use strict";
(function () {
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var STATUS_LABEL = { passed: "passed", failed: "failed", error: "error", not_applicable: "n/a" };
  var KNOWN = ["turns", "verdict", "reason", "score", "error", "attempts", "usage", "transcript", "reply"];

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
    return parent;
  }
  function fmt(score) { return score === null || score === undefined ? "—" : Number(score).toFixed(2); }
  function turnLabel(turns) {
    if (!turns || !turns.length) return "no turn cited";
    var n = turns.slice().sort(function (a, b) { return a - b; }).map(function (i) { return i + 1; });
    return (n.length === 1 ? "turn " : "turns ") + n.join(", ");
  }
  function badge(status) {
    return el("span", "status " + (status || "none"), STATUS_LABEL[status] || status || "—");
  }
  function verdictClass(v) {
    if (v.verdict === null || v.verdict === undefined) return "verdict-error";
    return v.verdict === "yes" ? "verdict-yes" : v.verdict === "no" ? "verdict-no" : "verdict-other";
  }

  // ---- header, summary, input errors
  var meta = document.getElementById("meta");
  meta.textContent = "results: " + DATA.source + (DATA.inputs.length ? " · input: " + DATA.inputs.join(", ") : "") +
    " · generated " + DATA.generated;
  var t = DATA.totals;
  document.getElementById("totals").textContent = t.conversations + " conversations, " + t.results + " results: " +
    t.passed + " passed, " + t.failed + " failed, " + t.error + " errors, " + t.not_applicable + " n/a; " +
    t.judge_errors + " judge errors, " + t.run_errors + " failed runs, " + t.input_errors + " input errors" +
    (t.unreadable_lines ? ", " + t.unreadable_lines + " unreadable results lines" : "") + ".";
  if (DATA.problems.length) {  // results lines that could not be shown, input records that could not be read
    var plist = el("ul", "problems");
    DATA.problems.forEach(function (p) { plist.appendChild(el("li", "judge-error", p)); });
    document.getElementById("totals").after(plist);
  }
  var sbody = document.querySelector("#summary-table tbody");
  DATA.metrics.forEach(function (m) {
    var s = DATA.summary[m];
    var tr = el("tr");
    tr.setAttribute("data-metric", m);
    add(tr, el("td", null, m), el("td", "num", s.passed), el("td", "num", s.failed), el("td", "num", s.error),
      el("td", "num", s.not_applicable), el("td", "num", s.judge_errors), el("td", "num", fmt(s.mean_score)));
    var hist = el("div", "hist");
    var max = Math.max.apply(null, s.histogram.concat([1]));
    s.histogram.forEach(function (c, i) {
      var bar = el("span");
      bar.style.height = (100 * c / max) + "%";
      bar.title = (i / 10).toFixed(1) + "–" + ((i + 1) / 10).toFixed(1) + ": " + c;
      hist.appendChild(bar);
    });
    tr.appendChild(add(el("td"), hist));
    sbody.appendChild(tr);
  });
  if (DATA.input_errors.length) {
    var sec = document.getElementById("input-errors");
    sec.hidden = false;
    var ibody = sec.querySelector("tbody");
    DATA.input_errors.forEach(function (e) {
      ibody.appendChild(add(el("tr"), el("td", null, e.file), el("td", "num", e.line), el("td", null, e.record),
        el("td", null, e.field), el("td", null, e.message || e.error)));
    });
  }

  document.getElementById("filters").addEventListener("submit", function (ev) { ev.preventDefault(); });

  // ---- the conversations × metrics table
  var select = document.getElementById("filter-metric");
  var headRow = document.querySelector("#conversations-table thead tr");
  DATA.metrics.forEach(function (m) {
    var o = el("option", null, m);
    o.value = m;
    select.appendChild(o);
    var th = el("th", null, m);
    th.setAttribute("data-metric", m);
    headRow.appendChild(th);
  });
  var tbody = document.querySelector("#conversations-table tbody");
  var rows = DATA.conversations.map(function (c, index) {
    var tr = el("tr", "row");
    tr.setAttribute("data-index", String(index));
    tr.setAttribute("data-id", c.id);
    var first = el("td", "conv-id", c.id);
    if (c.error) add(first, el("div", "run-error", "run failed: " + c.error));
    tr.appendChild(first);
    DATA.metrics.forEach(function (m) {
      var r = c.results[m];
      var td = el("td");
      td.setAttribute("data-metric", m);
      if (r) {
        add(td, badge(r.status), document.createTextNode(" " + fmt(r.score)));
        if (r.errors && r.errors.length) add(td, el("span", "judge-error", " (" + r.errors.length + " judge err)"));
      } else {
        td.textContent = "—";
      }
      tr.appendChild(td);
    });
    tr.tabIndex = 0;  // rows open from the keyboard too
    tr.addEventListener("click", function () { toggle(tr, c); });
    tr.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); toggle(tr, c); }
    });
    tbody.appendChild(tr);
    return tr;
  });

  function hasFailed(c, m) {
    return Object.keys(c.results).some(function (k) { return (!m || k === m) && c.results[k].status === "failed"; });
  }
  function hasErrors(c, m) {
    if (c.error && !m) return true;
    return Object.keys(c.results).some(function (k) {
      var r = c.results[k];
      return (!m || k === m) && (r.status === "error" || (r.errors && r.errors.length > 0));
    });
  }
  function applyFilters() {
    var failed = document.getElementById("filter-failed").checked;
    var errors = document.getElementById("filter-errors").checked;
    var metric = select.value;
    var text = document.getElementById("filter-text").value.toLowerCase();
    var shown = 0;
    DATA.conversations.forEach(function (c, i) {
      var ok = (!failed || hasFailed(c, metric)) && (!errors || hasErrors(c, metric)) &&
        (!metric || c.results[metric] !== undefined) && (!text || c.id.toLowerCase().indexOf(text) >= 0);
      rows[i].hidden = !ok;
      var detail = rows[i].nextSibling;
      if (detail && detail.classList && detail.classList.contains("detail")) detail.hidden = !ok;
      if (ok) shown++;
    });
    document.querySelectorAll("#conversations-table [data-metric]").forEach(function (cell) {
      cell.hidden = !!metric && cell.getAttribute("data-metric") !== metric;
    });
    document.getElementById("shown").textContent = "showing " + shown + " of " + DATA.conversations.length;
  }
  ["filter-failed", "filter-errors", "filter-metric", "filter-text"].forEach(function (id) {
    document.getElementById(id).addEventListener("input", applyFilters);
    document.getElementById(id).addEventListener("change", applyFilters);
  });
  applyFilters();

  // ---- one conversation, opened under its row
  function toggle(tr, c) {
    var next = tr.nextSibling;
    if (next && next.classList && next.classList.contains("detail")) {
      next.remove();
      tr.classList.remove("open");
      return;
    }
    var row = el("tr", "detail");
    var cell = el("td", "detail-cell");
    cell.colSpan = DATA.metrics.length + 1;
    cell.appendChild(renderConversation(c));
    row.appendChild(cell);
    tr.parentNode.insertBefore(row, tr.nextSibling);
    tr.classList.add("open");
  }

  function renderConversation(c) {
    var box = el("div", "conversation");
    box.setAttribute("data-id", c.id);
    add(box, el("div", "muted", "source: " + (c.source || "—")));
    if (c.error) add(box, el("div", "run-error", "run failed: " + c.error));
    var byTurn = {};
    var metrics = Object.keys(c.results);
    metrics.forEach(function (m) {
      var r = c.results[m];
      var block = el("div", "metric-block " + r.status);
      block.setAttribute("data-metric", m);
      add(block, add(el("div"), el("strong", null, m), document.createTextNode(" "), badge(r.status),
        document.createTextNode(" score " + fmt(r.score) + (r.threshold === null || r.threshold === undefined ? "" :
          " (threshold " + fmt(r.threshold) + ")") + " · judge " + r.judge)));
      add(block, el("div", "reason text", r.reason));
      (r.errors || []).forEach(function (e) {
        add(block, el("div", "judge-error", "judge error at " + e.where + " (" + e.step + ", " + e.attempts +
          " attempts): " + e.message));
      });
      var loose = el("div", "verdicts");
      (r.verdicts || []).forEach(function (v) {
        var last = v.turns && v.turns.length ? Math.max.apply(null, v.turns) : null;
        if (c.turns && last !== null && last < c.turns.length) {
          (byTurn[last] = byTurn[last] || []).push(renderVerdict(m, v, false));
        } else {
          loose.appendChild(renderVerdict(m, v, !c.turns));
        }
      });
      if (loose.childNodes.length) block.appendChild(loose);
      box.appendChild(block);
    });
    if (c.turns) {
      var list = el("div", "turns");
      c.turns.forEach(function (turn, i) {
        var tdiv = el("div", "turn " + turn.role);
        tdiv.setAttribute("data-turn", String(i));
        add(tdiv, el("div", "turn-head", "turn " + (i + 1) + " · " + turn.role), el("div", "text content", turn.content));
        (byTurn[i] || []).forEach(function (v) { tdiv.appendChild(v); });
        list.appendChild(tdiv);
      });
      add(box, el("h4", null, "Turns"), list);
    } else {
      add(box, el("p", "muted", "The results do not hold the conversation's turns: run `judgegraph report RESULTS --input FILE` to show them."));
    }
    return box;
  }

  function renderVerdict(metric, v, showReply) {
    var d = el("div", "verdict");
    var verdict = v.verdict === null || v.verdict === undefined ? "no verdict" : v.verdict;
    add(d, add(el("div"), el("span", "muted", metric + " · " + turnLabel(v.turns) + " · "),
      el("span", verdictClass(v), verdict),
      v.score === null || v.score === undefined ? null : el("span", "muted", " (score " + fmt(v.score) + ")")));
    if (v.reason) add(d, el("div", "reason text", v.reason));
    if (v.error) add(d, el("div", "judge-error text", "judge error: " + v.error));
    if (showReply && v.reply) add(d, add(el("div", "text"), el("span", "muted", "judged reply: "), el("span", "content", v.reply)));
    Object.keys(v).forEach(function (k) {
      if (KNOWN.indexOf(k) >= 0 || v[k] === null || v[k] === "" || (Array.isArray(v[k]) && !v[k].length)) return;
      var value = typeof v[k] === "string" ? v[k] : JSON.stringify(v[k]);
      add(d, el("div", "extra text", k + ": " + value));
    });
    d.appendChild(renderTranscript(v.transcript));
    return d;
  }

  function renderTranscript(transcript) {
    if (!transcript || !transcript.length) return el("div", "extra no-transcript", "no transcript recorded");
    var det = el("details", "transcript");
    var asks = transcript.length > 1 ? " (" + (transcript.length - 1) + " re-ask" + (transcript.length > 2 ? "s" : "") + ")" : "";
    add(det, el("summary", null, "transcript: " + transcript.length + " call" + (transcript.length > 1 ? "s" : "") + asks));
    transcript.forEach(function (a, i) {
      var at = el("div", "attempt");
      var bits = ["call " + (i + 1), a.step];
      if (a.model) bits.push(a.model);
      if (a.latency_s !== null && a.latency_s !== undefined) bits.push(Number(a.latency_s).toFixed(2) + " s");
      if (a.usage && (a.usage.input_tokens || a.usage.output_tokens)) bits.push(a.usage.input_tokens + " in / " + a.usage.output_tokens + " out tokens");
      if (a.cached) bits.push("cached");
      if (a.settings && Object.keys(a.settings).length) bits.push(JSON.stringify(a.settings));
      add(at, el("div", "muted", bits.join(" · ")));
      (a.messages || []).forEach(function (msg) {
        add(at, add(el("div", "message"), el("div", "role", "sent · " + msg.role), el("pre", "text", msg.content)));
      });
      add(at, add(el("div", "message reply"), el("div", "role", "reply"),
        el("pre", "text", a.reply === null || a.reply === undefined ? "(no reply)" : a.reply)));
      if (a.error) add(at, el("div", "judge-error text", "error: " + a.error));
      det.appendChild(at);
    });
    return det;
  }
})();
