// judgegraph HTML report. The tables are written by Python (the page reads with
// JavaScript off); this script filters, sorts and opens conversations. Every
// piece of conversation content is set with textContent (never innerHTML): a
// reply containing markup shows as text.
"use strict";
(function () {
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var COMPARE = !!DATA.compare;
  var STATUS_LABEL = { passed: "passed", failed: "failed", error: "error", not_applicable: "n/a" };
  var KNOWN = ["turns", "verdict", "reason", "score", "error", "attempts", "usage", "transcript", "reply"];
  var NRUNS = DATA.runs.length;

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
  // each conversation's line in every run (null: the run has none)
  function cellsOf(c) { return COMPARE ? c.runs : [{ source: c.source, error: c.error, results: c.results }]; }

  document.documentElement.classList.add("js");  // sort buttons look like buttons only when they work
  document.getElementById("filters").hidden = false;
  document.querySelectorAll(".js-only").forEach(function (e) { e.hidden = false; });
  document.getElementById("filters").addEventListener("submit", function (ev) { ev.preventDefault(); });

  // ---- rows (written by Python), their conversations
  var table = document.getElementById("conversations-table");
  var tbody = table.querySelector("tbody");
  var rows = Array.prototype.slice.call(tbody.querySelectorAll("tr.row"));
  rows.forEach(function (tr) {
    var c = DATA.conversations[Number(tr.getAttribute("data-index"))];
    tr.addEventListener("click", function () { toggle(tr, c); });
    tr.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); toggle(tr, c); }
    });
  });
  function conv(tr) { return DATA.conversations[Number(tr.getAttribute("data-index"))]; }

  // ---- filters
  var select = document.getElementById("filter-metric");
  DATA.metrics.forEach(function (m) {
    var o = el("option", null, m);
    o.value = m;
    select.appendChild(o);
  });
  function anyResult(c, m, test) {
    return cellsOf(c).some(function (cell) {
      if (!cell) return false;
      return Object.keys(cell.results).some(function (k) { return (!m || k === m) && test(cell.results[k]); });
    });
  }
  function hasFailed(c, m) { return anyResult(c, m, function (r) { return r.status === "failed"; }); }
  function hasErrors(c, m) {
    if (!m && cellsOf(c).some(function (cell) { return cell && cell.error; })) return true;
    return anyResult(c, m, function (r) { return r.status === "error" || (r.errors && r.errors.length > 0); });
  }
  function hasMetric(c, m) { return cellsOf(c).some(function (cell) { return cell && cell.results[m] !== undefined; }); }
  function differsIn(c, m) {
    if (!m) return c.differs;
    var seen = cellsOf(c).map(function (cell) {
      if (!cell) return "missing";
      var r = cell.results[m];
      return r ? r.status + "|" + r.score : "none";
    });
    return seen.some(function (s) { return s !== seen[0]; });
  }
  function applyFilters() {
    var differs = COMPARE && document.getElementById("filter-differs").checked;
    var failed = document.getElementById("filter-failed").checked;
    var errors = document.getElementById("filter-errors").checked;
    var metric = select.value;
    var text = document.getElementById("filter-text").value.toLowerCase();
    var shown = 0;
    rows.forEach(function (tr) {
      var c = conv(tr);
      var ok = (!differs || differsIn(c, metric)) && (!failed || hasFailed(c, metric)) &&
        (!errors || hasErrors(c, metric)) && (!metric || hasMetric(c, metric)) &&
        (!text || c.id.toLowerCase().indexOf(text) >= 0);
      tr.hidden = !ok;
      var detail = tr.nextElementSibling;
      if (detail && detail.classList.contains("detail")) detail.hidden = !ok;
      if (ok) shown++;
    });
    table.querySelectorAll("[data-metric]").forEach(function (cell) {
      cell.hidden = !!metric && cell.getAttribute("data-metric") !== metric;
    });
    document.getElementById("shown").textContent = "showing " + shown + " of " + rows.length;
  }
  ["filter-differs", "filter-failed", "filter-errors", "filter-metric", "filter-text"].forEach(function (id) {
    var input = document.getElementById(id);
    if (!input) return;
    input.addEventListener("input", applyFilters);
    input.addEventListener("change", applyFilters);
  });
  applyFilters();

  // ---- sorting: the order select, or a column's header (click again: the other way)
  var order = document.getElementById("sort-order");
  var sortState = { key: "failing", th: null, dir: 1 };
  function rowKey(tr) {
    if (sortState.key === "id") return [conv(tr).id];
    if (sortState.key === "position") return [Number(tr.getAttribute("data-position"))];
    if (sortState.key === "failing") return [Number(tr.getAttribute("data-failing")) ? 0 : 1, Number(tr.getAttribute("data-position"))];
    var m = sortState.th.getAttribute("data-metric"), run = sortState.th.getAttribute("data-run");
    var td = Array.prototype.find.call(tr.children, function (d) {
      return d.getAttribute("data-metric") === m && d.getAttribute("data-run") === run;
    });
    var s = td && td.getAttribute("data-score");
    return [s === null || s === undefined ? null : Number(s), Number(tr.getAttribute("data-position"))];
  }
  function compareKeys(a, b) {
    for (var i = 0; i < a.length; i++) {
      if (a[i] === b[i]) continue;
      if (a[i] === null) return 1;  // no score: always last
      if (b[i] === null) return -1;
      var d = a[i] < b[i] ? -1 : 1;
      return i === 0 ? d * sortState.dir : d;
    }
    return 0;
  }
  function sortRows() {
    var keyed = rows.map(function (tr) { return { tr: tr, key: rowKey(tr) }; });
    keyed.sort(function (a, b) { return compareKeys(a.key, b.key); });
    keyed.forEach(function (k) {
      var detail = k.tr.nextElementSibling;
      tbody.appendChild(k.tr);
      if (detail && detail.classList.contains("detail")) tbody.appendChild(detail);
    });
    rows = keyed.map(function (k) { return k.tr; });
    table.querySelectorAll("th[data-sort]").forEach(function (th) {
      if (th === sortState.th) th.setAttribute("aria-sort", sortState.dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
  }
  order.addEventListener("change", function () {
    if (order.value === "column") return;
    sortState = { key: order.value, th: null, dir: 1 };
    sortRows();
  });
  table.querySelectorAll("th[data-sort] button.sort").forEach(function (button) {
    var th = button.parentNode;
    button.addEventListener("click", function (ev) {
      ev.stopPropagation();
      var key = th.getAttribute("data-sort");
      var dir = sortState.th === th ? -sortState.dir : 1;
      sortState = { key: key, th: th, dir: dir };
      order.value = key === "id" ? "id" : "column";
      sortRows();
    });
  });

  // ---- one conversation, opened under its row (one column per run when comparing)
  function toggle(tr, c) {
    var next = tr.nextElementSibling;
    if (next && next.classList.contains("detail")) {
      next.remove();
      tr.classList.remove("open");
      return;
    }
    var row = el("tr", "detail");
    var cell = el("td", "detail-cell");
    cell.colSpan = DATA.metrics.length * NRUNS + 1;
    if (COMPARE) {
      var grid = el("div", "side-by-side");
      grid.style.gridTemplateColumns = "repeat(" + NRUNS + ", minmax(0, 1fr))";
      c.runs.forEach(function (record, i) {
        var run = DATA.runs[i];
        var col = el("div", "run-column");
        col.setAttribute("data-run", String(i));
        add(col, add(el("h3", "run-title"), el("span", "run-label", "run " + run.label), el("span", "muted", " · " + run.path)));
        if (record) col.appendChild(renderConversation(c, record));
        else add(col, el("p", "status missing", "missing: this run has no line for this conversation"));
        grid.appendChild(col);
      });
      cell.appendChild(grid);
    } else {
      cell.appendChild(renderConversation(c, cellsOf(c)[0]));
    }
    row.appendChild(cell);
    tr.parentNode.insertBefore(row, tr.nextSibling);
    tr.classList.add("open");
  }

  function transcriptNote(r) {
    var verdicts = r.verdicts || [];
    var any = verdicts.some(function (v) { return v.transcript && v.transcript.length; }) ||
      (r.transcript && r.transcript.length);
    if (any || !verdicts.length) return null;
    if (String(r.judge || "").indexOf("offline") === 0)
      return el("div", "extra no-transcript", "no transcript recorded: the offline judge (" + r.judge +
        ") makes no LLM requests; its reasons come from the figures it computed");
    return el("div", "extra no-transcript", "no transcript recorded for this metric's verdicts " +
      "(the run kept none: eval --transcripts none or errors, or results older than transcripts)");
  }

  function renderConversation(c, record) {
    var box = el("div", "conversation");
    box.setAttribute("data-id", c.id);
    add(box, el("div", "muted", "source: " + (record.source || "—")));
    if (record.error) add(box, el("div", "run-error", "run failed: " + record.error));
    var byTurn = {};
    var turns = record.turns || c.turns;  // the run's own turns (from its header's input files) when known
    Object.keys(record.results).forEach(function (m) {
      var r = record.results[m];
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
      add(block, transcriptNote(r));
      var loose = el("div", "verdicts");
      (r.verdicts || []).forEach(function (v) {
        var last = v.turns && v.turns.length ? Math.max.apply(null, v.turns) : null;
        if (turns && last !== null && last < turns.length) {
          var differs = v.reply && v.reply !== turns[last].content;  // another version's reply to the same turn
          (byTurn[last] = byTurn[last] || []).push(renderVerdict(m, v, !!differs));
        } else {
          loose.appendChild(renderVerdict(m, v, !turns));
        }
      });
      if (loose.childNodes.length) block.appendChild(loose);
      box.appendChild(block);
    });
    if (turns) {
      var list = el("div", "turns");
      turns.forEach(function (turn, i) {
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
    add(d, renderTranscript(v.transcript));
    return d;
  }

  function renderTranscript(transcript) {
    if (!transcript || !transcript.length) return null;  // said once per metric (transcriptNote)
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
