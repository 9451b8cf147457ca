// candle-graph report, part 3 of 5: the icicles and the flame graph of the sampled stacks.
  // ---- icicles ----
  var HUES = 6;
  function node(box, x, y, w, text, cls, label, onTip, onClick) {
    var b = el(onClick ? "button" : "div", "node " + cls, text);
    if (onClick) b.type = "button";
    b.style.left = x + "px"; b.style.top = y + "px"; b.style.width = Math.max(1, w - 1) + "px";
    b.setAttribute("role", "treeitem");
    b.setAttribute("aria-label", label);
    if (w < 24) b.tabIndex = -1;
    b.addEventListener("mouseenter", function (ev) { showTip(onTip(), ev.clientX, ev.clientY); });
    b.addEventListener("mousemove", function (ev) { showTip(onTip(), ev.clientX, ev.clientY); });
    b.addEventListener("mouseleave", hideTip);
    b.addEventListener("focus", function () { var r = b.getBoundingClientRect(); showTip(onTip(), r.left, r.bottom); });
    b.addEventListener("blur", hideTip);
    if (onClick) b.addEventListener("click", onClick);
    box.appendChild(b);
    return b;
  }

  function heldIcicle(box, d) {
    var dev = data.devices[d], root = dev.held;
    if (!root) { box.appendChild(el("p", "muted", "no storage live at the peak")); return; }
    var total = root.b, focus = [root], path = [root.n];
    function draw() {
      box.textContent = "";
      var W = Math.max(280, box.clientWidth || 600), top = focus[focus.length - 1], rows = 0;
      function walk(n, x, w, depth, names) {
        if (w < 0.5) return;
        rows = Math.max(rows, depth + 1);
        var nm = names.concat([n.n]);
        var pathText = nm.slice(1).join("/") || n.n;
        var tipRows = function () {
          return [["span path", pathText], ["live at the peak", fmtBytes(n.b)], ["share of the peak", share(n.b, total)], ["storages", String(n.k)]];
        };
        node(box, x, depth * 22, w, n.n + " " + fmtBytes(n.b), "h" + (depth % HUES),
          pathText + ": " + fmtBytes(n.b) + ", " + share(n.b, total) + " of the peak",
          tipRows, n.c ? function () {
            if (n === top && focus.length > 1) { focus.pop(); path.pop(); } else if (n !== top) { focus.push(n); path.push(n.n); }
            draw();
          } : null);
        var cx = x;
        (n.c || []).forEach(function (c) { var cw = n.b > 0 ? w * c.b / n.b : 0; walk(c, cx, cw, depth + 1, nm); cx += cw; });
      }
      walk(top, 0, W, 0, path.slice(0, -1));
      box.style.height = rows * 22 + 4 + "px";
    }
    draw();
    window.addEventListener("resize", draw);
  }

  function spanIcicle(box) {
    var n = S.name.length;
    if (!n) { box.appendChild(el("p", "muted", "no spans")); return; }
    var lo = Infinity, hi = -Infinity;
    for (var i = 0; i < n; i++) { lo = Math.min(lo, S.start[i]); hi = Math.max(hi, S.end[i] === null ? S.start[i] : S.end[i]); }
    var lastEnd = hi;
    if (hi <= lo) hi = lo + 1;
    var view = [lo, hi];
    function draw() {
      box.textContent = "";
      var W = Math.max(280, box.clientWidth || 600);
      var sx = function (t) { return (t - view[0]) / (view[1] - view[0]) * W; };
      var y = 0, maxDepth = [], apartRows = [];
      for (var i = 0; i < n; i++) if (!S.apart[i]) {
        var l = S.lane[i]; maxDepth[l] = Math.max(maxDepth[l] || 0, S.depth[i]);
      }
      var laneTop = [];
      for (var l = 0; l < S.lanes; l++) {
        if (maxDepth[l] === undefined) continue;
        var head = el("div", "lanehead", "host lane " + (l + 1));
        head.style.top = y + "px"; box.appendChild(head);
        laneTop[l] = y + 16; y += 16 + (maxDepth[l] + 1) * 22;
      }
      // spans that do not nest: their own rows, packed by time
      var apartTop = y, narrow = 0;
      var order = [];
      for (var k = 0; k < n; k++) if (S.apart[k]) order.push(k);
      order.sort(function (a, b) { return S.start[a] - S.start[b]; });
      var rowOf = {};
      order.forEach(function (k) {
        var e = S.end[k] === null ? lastEnd : S.end[k], r = 0;
        while (apartRows[r] !== undefined && apartRows[r] > S.start[k]) r++;
        apartRows[r] = e; rowOf[k] = r;
      });
      if (order.length) {
        var ah = el("div", "lanehead", "spans that do not nest (outlive their parent or overlap a sibling)");
        ah.style.top = y + "px"; box.appendChild(ah);
        apartTop = y + 16; y += 16 + apartRows.length * 22;
      }
      for (var j = 0; j < n; j++) {
        var s = S.start[j], e = S.end[j] === null ? lastEnd : S.end[j];
        if (e < view[0] || s > view[1]) continue;
        var x0 = Math.max(0, sx(s)), x1 = Math.min(W, sx(e));
        if (x1 - x0 < 1) { narrow++; continue; }
        var top = S.apart[j] ? apartTop + rowOf[j] * 22 : laneTop[S.lane[j]] + S.depth[j] * 22;
        (function (j) {
          var tipRows = function () {
            var r = [["span", spanPath(j)], ["total", S.total[j] === null ? (S.end[j] === null ? "open (trace cut short)" : "-") : fmtDur(S.total[j])],
              ["self", S.self[j] === null ? "-" : fmtDur(S.self[j])], ["start", fmtAt(S.start[j])],
              ["subtree peak", S.peak[j] === null ? "-" : fmtBytes(S.peak[j])]];
            if (S.pass[j]) r.push(["pass", S.pass[j]]);
            if (S.apart[j]) r.push(["drawn apart", S.apart[j].replace(/_/g, " ")]);
            return r;
          };
          node(box, x0, top, x1 - x0, S.name[j], "h" + (S.depth[j] % HUES) + (S.apart[j] ? " apart" : ""),
            spanPath(j) + ", total " + (S.total[j] === null ? "unknown" : fmtDur(S.total[j])), tipRows,
            function () { var e2 = S.end[j] === null ? lastEnd : S.end[j]; view = e2 > S.start[j] ? [S.start[j], e2] : [lo, hi]; draw(); });
        })(j);
      }
      box.style.height = y + 4 + "px";
      var info = box.parentNode.querySelector(".icicle-info");
      if (info) info.textContent = (narrow ? plural(narrow, "span", "spans") + " too narrow to draw at this zoom; " : "") +
        (S.omitted ? S.omitted + " short spans not embedded (the span-cost table counts them); " : "") +
        "click a span to zoom to it, Escape for the whole step.";
    }
    var info = el("p", "footer icicle-info");
    box.parentNode.insertBefore(info, box.nextSibling);
    box.addEventListener("keydown", function (ev) { if (ev.key === "Escape") { view = [lo, hi]; draw(); } });
    draw();
    window.addEventListener("resize", draw);
  }

  // A name shortened to `chars` characters keeping its last path segment (the function):
  // `candle_core::tensor::Tensor::matmul` → `candle_c…::matmul`; a segment longer than the room
  // keeps its end.
  function elideName(name, chars) {
    if (name.length <= chars) return name;
    var cut = name.lastIndexOf("::"), last = cut >= 0 ? name.slice(cut + 2) : name;
    if (cut < 0 || last.length + 4 > chars) return "…" + last.slice(Math.max(0, last.length - chars + 1));
    return name.slice(0, chars - last.length - 3) + "…::" + last;
  }

  // ---- flame graph of the sampled stacks, one tree per pass ----
  // Trees are columns in pre-order (data.flame): name (into strings), parent (-1: root),
  // value (samples through the node), self, merged. Layout and drawing use explicit stacks.
  // A path that may wrap after each `::` (a zero-width space), not inside a word, on a narrow
  // screen.
  function breakable(path) { return String(path).replace(/::/g, "::\u200b"); }
  function flameGraph(box) {
    var F = data.flame, trees = (F && F.trees) || [];
    var area = box.querySelector(".flame-area"), tabs = box.querySelector(".flame-tabs");
    var info = box.querySelector(".flame-info");
    if (!trees.length) { area.appendChild(el("p", "muted", "no sampled stacks")); return; }
    var cur = 0, zoom = 0, focusNode = 0, kids = [];
    trees.forEach(function (t) {
      var k = t.parent.map(function () { return []; });
      for (var i = 1; i < t.parent.length; i++) k[t.parent[i]].push(i);
      kids.push(k);
    });
    var ROW = 18, SMALL = 3, hideProbe = false;
    // samples of the probe's own frames under each node (nodes come parent first)
    var probeUnder = trees.map(function (t) {
      var p = t.value.map(function (v, i) { return t.kind[i] === "probe" ? v : 0; });
      // children before parents; a probe node's samples already hold its subtree's
      for (var i = t.parent.length - 1; i > 0; i--) if (t.kind[t.parent[i]] !== "probe") p[t.parent[i]] += p[i];
      return p;
    });
    function val(c, n) { return hideProbe ? trees[c].value[n] - probeUnder[c][n] : trees[c].value[n]; }
    var probeTotal = probeUnder.reduce(function (a, p) { return a + p[0]; }, 0);
    if (probeTotal > 0) {
      var lab = el("label", "flame-probe"), cb = el("input");
      cb.type = "checkbox";
      cb.className = "flame-hide-probe";
      cb.addEventListener("change", function () { hideProbe = cb.checked; zoom = 0; focusNode = 0; draw(false); });
      lab.appendChild(cb);
      lab.appendChild(document.createTextNode("hide the probe's own frames (" + plural(probeTotal, "sample", "samples") + ")"));
      box.querySelector(".flame-controls").appendChild(lab);
    }
    trees.forEach(function (t, i) {
      var b = el("button", null, t.label + " (" + plural(t.samples, "sample", "samples") + ")");
      b.type = "button";
      b.setAttribute("role", "tab");
      b.dataset.tree = String(i);
      b.addEventListener("click", function () { select(i); });
      tabs.appendChild(b);
    });
    tabs.addEventListener("keydown", function (ev) {
      var d = ev.key === "ArrowRight" ? 1 : ev.key === "ArrowLeft" ? -1 : 0;
      if (!d) return;
      select((cur + d + trees.length) % trees.length);
      tabs.querySelectorAll("button")[cur].focus();
      ev.preventDefault();
    });
    function select(i) {
      cur = i; zoom = 0; focusNode = 0;
      tabs.querySelectorAll("button").forEach(function (b, j) {
        b.setAttribute("aria-selected", j === i ? "true" : "false");
        b.tabIndex = j === i ? 0 : -1;
      });
      draw(false);
    }
    // the samples of tree c the shares are of: the user's work when the probe is hidden
    function totalOf(c) { return hideProbe ? trees[c].samples - probeUnder[c][0] : trees[c].samples; }
    function tipRows(t, i) {
      var total = totalOf(cur), r = [["function", F.strings[t.name[i]]]];
      if (t.op[i] >= 0) r.push([t.kind[i] === "backward_op" ? "backward op" : t.kind[i] === "op" ? "op" : "counted as", F.strings[t.op[i]]]);
      r.push(["samples", val(cur, i) + " of " + total + " in " + t.label], ["share of " + t.label + (hideProbe ? " (the user's work)" : ""), share(val(cur, i), total)]);
      if (t.kind[i] === "probe") r.push(["", "the probe's own work (its cost, not the model's)"]);
      if (!t.merged[i]) r.push(["self (innermost)", plural(t.self[i], "sample", "samples") + ", " + share(t.self[i], total)]);
      else r.push(["", "smaller frames merged (each under the drawing threshold)"]);
      if (total < 100) r.push(["", "few samples: shares are rough"]);
      return r;
    }
    function zoomTo(i) { zoom = i; focusNode = i; draw(true); }
    function draw(refocus) {
      var t = trees[cur], k = kids[cur];
      area.textContent = "";
      var W = Math.max(280, area.clientWidth || 600);
      // ancestors of the zoomed node, drawn full width above it
      var chain = [], a = zoom;
      while (a >= 0) { chain.push(a); a = t.parent[a]; }
      chain.reverse();
      var placed = []; // [node, x, w, depth]
      chain.forEach(function (n, d) { placed.push([n, 0, W, d]); });
      var stack = [[zoom, 0, W, chain.length - 1]], narrow = 0, rows = chain.length;
      while (stack.length) {
        var top = stack.pop(), n = top[0], x = top[1], w = top[2], d = top[3];
        if (n !== zoom) placed.push(top);
        rows = Math.max(rows, d + 1);
        var cx = x, ch = k[n];
        for (var j = 0; j < ch.length; j++) {
          var c = ch[j], vn = val(cur, n), cw = vn > 0 ? w * val(cur, c) / vn : 0;
          if (hideProbe && t.kind[c] === "probe") continue;
          if (cw < 1) narrow++; else stack.push([c, cx, cw, d + 1]);
          cx += cw;
        }
      }
      var H = rows * ROW + 2;
      var root = svg("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H });
      var focusEl = null;
      placed.forEach(function (p) {
        var n = p[0], x = p[1], w = p[2], d = p[3];
        var g = svg("g", { "data-node": n, tabindex: n === focusNode ? 0 : -1, role: "button",
          "aria-label": F.strings[t.name[n]] + (t.op[n] >= 0 ? " [" + F.strings[t.op[n]] + "]" : "") + ": " + plural(val(cur, n), "sample", "samples") + ", " + share(val(cur, n), totalOf(cur)) + " of " + t.label + (t.kind[n] === "probe" ? " (the probe's own work)" : "") },
          "fn" + (n === zoom ? " zoomed" : "") + (d < chain.length - 1 ? " above" : "") + (t.kind[n] === "probe" ? " probe" : ""));
        g.appendChild(svg("rect", { x: x.toFixed(2), y: d * ROW, width: Math.max(0.5, w - 0.5).toFixed(2), height: ROW - 1,
          "data-width": w.toFixed(2) }, t.merged[n] ? "merged" : "f" + (d % HUES)));
        var chars = Math.floor((w - 6) / 6.6);
        if (chars >= SMALL) {
          var name = F.strings[t.name[n]];
          if (t.kind[n] === "backward_op") name += " [" + F.strings[t.op[n]] + "]";
          if (t.kind[n] === "probe") name = "probe: " + name;
          var txt = svg("text", { x: (x + 3).toFixed(2), y: d * ROW + 13 });
          txt.textContent = elideName(name, chars);
          g.appendChild(txt);
        }
        var tipAt = function (ev) { showTip(tipRows(t, n), ev.clientX, ev.clientY); };
        g.addEventListener("mouseenter", tipAt);
        g.addEventListener("mousemove", tipAt);
        g.addEventListener("mouseleave", hideTip);
        g.addEventListener("focus", function () { focusNode = n; var r = g.getBoundingClientRect(); showTip(tipRows(t, n), r.left, r.bottom); });
        g.addEventListener("blur", hideTip);
        g.addEventListener("click", function () { zoomTo(n === zoom && zoom !== 0 ? Math.max(0, t.parent[n]) : n); });
        root.appendChild(g);
        if (n === focusNode) focusEl = g;
      });
      area.appendChild(root);
      area.dataset.zoom = String(zoom);
      area.dataset.width = String(W);
      info.textContent = t.label + ": " + plural(t.samples, "sample", "samples") + (t.samples < 100 ? " (few samples: shares are rough)" : "") +
        (t.rooted_at >= 0 ? "; rooted at the step's frame " + breakable(F.strings[t.rooted_at]) + " (the frames above it, process start-up, left out)" : "") +
        (hideProbe ? "; the probe's own " + plural(probeUnder[cur][0], "sample", "samples") + " hidden, shares of the user's " + totalOf(cur) : "") +
        (zoom ? "; zoomed into " + breakable(F.strings[t.name[zoom]]) + " (" + share(val(cur, zoom), totalOf(cur)) + ")" : "") +
        (narrow ? "; " + plural(narrow, "frame", "frames") + " too narrow to draw at this zoom" : "") +
        (t.merged_nodes ? "; " + t.merged_nodes + " small frames merged into “(other)” nodes" : "") +
        ". Click a frame (or Enter) to zoom into it; Escape or “Reset zoom” for the whole pass; arrow keys move between frames.";
      if (refocus && focusEl) focusEl.focus();
    }
    function move(ev) {
      var t = trees[cur], k = kids[cur], n = focusNode, next = -1;
      if (ev.key === "ArrowUp") next = t.parent[n];
      else if (ev.key === "ArrowDown") next = k[n].length ? k[n][0] : -1;
      else if (ev.key === "ArrowLeft" || ev.key === "ArrowRight") {
        var p = t.parent[n];
        if (p >= 0) { var sib = k[p], at = sib.indexOf(n) + (ev.key === "ArrowLeft" ? -1 : 1); if (at >= 0 && at < sib.length) next = sib[at]; }
      } else return false;
      if (next >= 0) {
        var e = area.querySelector('g[data-node="' + next + '"]');
        if (e) { area.querySelectorAll("g.fn").forEach(function (g) { g.setAttribute("tabindex", "-1"); }); e.setAttribute("tabindex", "0"); e.focus(); }
      }
      return true;
    }
    area.addEventListener("keydown", function (ev) {
      if (ev.key === "Escape") { zoom = 0; focusNode = 0; draw(true); hideTip(); }
      else if (ev.key === "Enter" || ev.key === " ") { var g = ev.target.closest ? ev.target.closest("g.fn") : null; if (!g) return; zoomTo(Number(g.getAttribute("data-node"))); }
      else if (!move(ev)) return;
      ev.preventDefault();
    });
    box.querySelector(".flame-reset").addEventListener("click", function () { zoom = 0; focusNode = 0; draw(false); });
    var rt = null;
    window.addEventListener("resize", function () { clearTimeout(rt); rt = setTimeout(function () { draw(false); }, 100); });
    select(0);
  }

