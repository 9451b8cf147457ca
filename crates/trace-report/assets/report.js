// candle-graph report: charts, icicles, sortable tables and the live-set panel, drawn from the
// JSON data block. Trace text only ever reaches the page through textContent.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("cg-data").textContent);
  var tip = document.getElementById("tooltip");
  var CATS = data.categories;

  // ---- formatting: the same rules as trace-format (binary units, µs/ms/s, half-even ties) ----
  function fixed(x, digits) {
    var scale = Math.pow(10, digits);
    var r = x * scale;
    var f = Math.floor(r);
    var h = r - f === 0.5 ? (f % 2 === 0 ? f : f + 1) : Math.round(r);
    var s = String(h);
    if (digits === 0) return s;
    while (s.length <= digits) s = "0" + s;
    return s.slice(0, s.length - digits) + "." + s.slice(s.length - digits);
  }
  var UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
  function fmtBytes(n) {
    if (n < 1024) return n + " B";
    var v = n, u = 0;
    while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
    if (fixed(v, 2) === "1024.00" && u < UNITS.length - 1) { v /= 1024; u++; }
    return fixed(v, 2) + " " + UNITS[u];
  }
  function fmtDur(ns) {
    if (ns < 1000) return Math.round(ns) + " ns";
    if (ns < 1e6) return fixed(ns / 1e3, 1) + " µs";
    if (ns < 1e9) return fixed(ns / 1e6, 2) + " ms";
    return fixed(ns / 1e9, 2) + " s";
  }
  function fmtAt(t) { return t >= 0 ? fmtDur(t) : "-" + fmtDur(-t); }
  function share(part, total) { return total > 0 ? fixed(part * 100 / total, 1) + "%" : "-"; }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs, cls) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (cls) e.setAttribute("class", cls);
    return e;
  }
  // The width of `text` in px at `px` px of the page's font (a canvas measures it: the SVG's
  // viewBox is the chart's own width, one unit a pixel).
  var measure = null;
  function textWidth(text, px) {
    if (!measure) measure = document.createElement("canvas").getContext("2d");
    if (!measure) return text.length * px * 0.62;
    measure.font = px + "px " + getComputedStyle(document.body).fontFamily;
    return measure.measureText(text).width;
  }
  function showTip(rows, x, y) {
    tip.textContent = "";
    var t = el("table");
    rows.forEach(function (r) {
      var tr = el("tr");
      tr.appendChild(el("td", null, r[0]));
      tr.appendChild(el("td", r[2] || null, r[1]));
      t.appendChild(tr);
    });
    tip.appendChild(t);
    tip.hidden = false;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var left = Math.min(x + 14, window.innerWidth - w - 8);
    var top = y + 14 + h > window.innerHeight ? y - h - 10 : y + 14;
    tip.style.left = Math.max(4, left) + "px";
    tip.style.top = Math.max(4, top) + "px";
  }
  function hideTip() { tip.hidden = true; }

  // ---- spans: which one is active at a time ----
  var S = data.spans;
  // A path deeper than 32 levels shows its first 8 and last 24 names, as the CLI does: bounded
  // work and text whatever the depth. The head's last span of each span: parents come first.
  var headOf = null;
  function spanPath(i) {
    if (!headOf) {
      headOf = [];
      for (var k = 0; k < S.name.length; k++) headOf[k] = S.depth[k] < 8 || S.parent[k] < 0 ? k : headOf[S.parent[k]];
    }
    var tail = [], j = i;
    while (j >= 0 && tail.length < 32) { tail.push(S.name[j]); j = S.parent[j]; }
    tail.reverse();
    if (j < 0 || S.depth[i] < 32) return tail.join("/");
    tail = tail.slice(8);
    var head = [], levels = S.depth[i] + 1;
    for (j = headOf[i]; j >= 0 && head.length < 8; j = S.parent[j]) head.push(S.name[j]);
    head.reverse();
    return head.join("/") + "/…(" + (levels - 32) + " of " + levels + " levels left out)…/" + tail.join("/");
  }
  function spanAt(t) {
    var best = -1;
    for (var i = 0; i < S.name.length; i++) {
      var s = S.start[i], e = S.end[i];
      var inside = t >= s && (e === null || t < e || (e === s && t === s));
      if (!inside) continue;
      if (best < 0 || S.depth[i] > S.depth[best] ||
          (S.depth[i] === S.depth[best] && s >= S.start[best])) best = i;
    }
    return best;
  }

  // ---- memory charts ----
  var charts = [];
  function bsearch(ts, t) { // last index with ts[i] <= t, or -1
    var lo = 0, hi = ts.length - 1, r = -1;
    while (lo <= hi) { var m = (lo + hi) >> 1; if (ts[m] <= t) { r = m; lo = m + 1; } else hi = m - 1; }
    return r;
  }
  function Chart(root, d) {
    this.root = root; this.d = d; this.dev = data.devices[d];
    this.area = root.querySelector(".chart-area");
    var s = this.dev.series, ph = this.dev.physical;
    // x from the measured region's start (time 0), or earlier when events come before it
    var lo = s.t.length ? Math.min(0, s.t[0]) : 0, hi = s.t.length ? s.t[s.t.length - 1] : 1;
    if (ph) { lo = Math.min(lo, ph.t[0]); hi = Math.max(hi, ph.t[ph.t.length - 1]); }
    if (hi <= lo) hi = lo + 1;
    this.full = [lo, hi + (hi - lo) * 0.01];
    this.view = this.full.slice();
    this.cursor = -1;
    // the logical stack sets the y-scale; physical samples have their own axis (right)
    var ymax = 0, pmax = 0;
    s.total.forEach(function (v) { if (v > ymax) ymax = v; });
    if (ph) ["used", "reserved", "capacity", "resident"].forEach(function (k) {
      (ph[k] || []).forEach(function (v) { if (v !== null && v > pmax) pmax = v; });
    });
    this.ymax = ymax > 0 ? ymax * 1.08 : 1;
    this.pmax = pmax > 0 ? pmax * 1.08 : 0;
    root.dataset.yMax = String(this.ymax);
    root.dataset.zoomed = "false";
    this.seriesMax = s.total.reduce(function (a, b) { return Math.max(a, b); }, 0);
    root.dataset.chartMax = String(this.seriesMax);
    this.legend();
    this.draw();
    var self = this;
    this.area.addEventListener("mousemove", function (ev) { self.move(ev); });
    this.area.addEventListener("mouseleave", function () { hideTip(); });
    // a click focuses the chart: from then until it loses focus the wheel zooms
    this.area.addEventListener("focus", function () { self.engaged = true; });
    this.area.addEventListener("blur", function () { self.engaged = false; });
    this.area.addEventListener("mousedown", function (ev) { self.down(ev); });
    window.addEventListener("mouseup", function (ev) { self.up(ev); });
    this.area.addEventListener("wheel", function (ev) { self.wheel(ev); }, { passive: false });
    this.area.addEventListener("click", function (ev) {
      if (self.dragged) { self.dragged = false; return; }
      self.hover(ev); self.liveSet();

    });
    this.area.addEventListener("keydown", function (ev) { self.key(ev); });
    this.touch();
    this.area.addEventListener("blur", hideTip);
  }
  Chart.prototype.legend = function () {
    var lg = this.root.querySelector(".legend");
    var s = this.dev.series;
    CATS.forEach(function (c, k) {
      if (!s.cat[k].some(function (v) { return v > 0; })) return;
      var item = el("span");
      item.appendChild(el("span", "sw cat" + k));
      item.appendChild(document.createTextNode(c));
      lg.appendChild(item);
    });
    var ph = this.dev.physical;
    if (ph) ["used", "reserved", "capacity", "resident"].forEach(function (k, i) {
      if (!ph[k]) return;
      var item = el("span");
      item.appendChild(el("span", "sw line phys" + i));
      item.appendChild(document.createTextNode("physical " + k + " (" + ph.samples + " samples)"));
      lg.appendChild(item);
    });
  };
  // The axes' labels (bytes at 0, ¼, … of the scale) and the margins that hold them: measured
  // in the chart's font, so no label is cut on any screen.
  Chart.prototype.yLabels = function () {
    var out = [];
    for (var i = 0; i <= 4; i++) out.push(fmtBytes(Math.round(this.ymax * i / 4)));
    return out;
  };
  Chart.prototype.pLabels = function () {
    var out = [];
    if (this.pmax) for (var q = 0; q <= 4; q += 2) out.push(fmtBytes(Math.round(this.pmax * q / 4)));
    return out;
  };
  Chart.prototype.geom = function () {
    var w = Math.max(240, this.area.clientWidth || 600);
    var narrow = w < 500, font = 11;
    var widest = function (labels) { return labels.reduce(function (m, t) { return Math.max(m, textWidth(t, font)); }, 0); };
    // 4 px between label and axis, 4 px to the edge; the right axis also has its rotated title
    var l = Math.ceil(widest(this.yLabels())) + 10;
    var r = this.pmax ? Math.ceil(widest(this.pLabels())) + 8 + font + 4 : 10;
    return { w: w, h: narrow ? 200 : 260, l: l, r: r, t: 10, b: 24, narrow: narrow };
  };
  Chart.prototype.py = function (v, g) { return g.t + (1 - v / this.pmax) * (g.h - g.t - g.b); };
  Chart.prototype.tAt = function (clientX) {
    var g = this.g, rect = this.area.getBoundingClientRect();
    var px = (clientX - rect.left) * g.w / rect.width;
    return this.view[0] + (px - g.l) / (g.w - g.l - g.r) * (this.view[1] - this.view[0]);
  };
  // wheel: zoom around the pointer (shift or a sideways wheel: pan) with ctrl/⌘ held (a
  // trackpad pinch arrives so) or once the chart was clicked, as map widgets do; otherwise the
  // page scrolls and a hint says how to zoom.
  Chart.prototype.wheel = function (ev) {
    if (!(ev.ctrlKey || ev.metaKey || this.engaged)) { this.hint("ctrl + wheel (⌘ on a Mac) or click the chart first to zoom"); return; }
    ev.preventDefault();
    var w = this.view[1] - this.view[0];
    if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
      this.pan((ev.deltaX || ev.deltaY) > 0 ? w / 10 : -w / 10);
      return;
    }
    var t = this.tAt(ev.clientX), f = ev.deltaY < 0 ? 0.8 : 1.25;
    this.zoomTo(t - (t - this.view[0]) * f, t + (this.view[1] - t) * f);
  };
  Chart.prototype.zoomTo = function (a, b) {
    var full = this.full, minW = Math.max(1, (full[1] - full[0]) / 1e6);
    if (b - a < minW) { var m = (a + b) / 2; a = m - minW / 2; b = m + minW / 2; }
    a = Math.max(full[0], a); b = Math.min(full[1], b);
    if (b <= a) { a = full[0]; b = full[1]; }
    this.view = [a, b];
    this.root.dataset.zoomed = String(a > full[0] || b < full[1]);
    this.draw();
  };
  // A window of the same width moved inside the whole timeline (narrowed to it when wider).
  Chart.prototype.clamp = function (a, b) {
    var full = this.full, w = Math.min(b - a, full[1] - full[0]);
    if (a < full[0]) a = full[0];
    if (a + w > full[1]) a = full[1] - w;
    return [a, a + w];
  };
  Chart.prototype.pan = function (dt) {
    var w = this.view[1] - this.view[0], a = this.view[0] + dt;
    a = Math.max(this.full[0], Math.min(this.full[1] - w, a));
    this.zoomTo(a, a + w);
  };
  // Touch: one finger dragged sideways pans, two fingers pinch-zoom around their midpoint (the
  // page keeps vertical scrolling: touch-action pan-y). Each finger down or up starts the
  // gesture again from the view of that moment.
  Chart.prototype.touch = function () {
    var self = this, area = this.area, pts = {}, base = null;
    function xs() { return Object.keys(pts).map(function (k) { return pts[k]; }); }
    function frac(clientX) {
      var g = self.g, rect = area.getBoundingClientRect();
      return ((clientX - rect.left) * g.w / rect.width - g.l) / (g.w - g.l - g.r);
    }
    function restart() { base = { view: self.view.slice(), xs: xs() }; }
    area.addEventListener("pointerdown", function (ev) {
      if (ev.pointerType !== "touch") return;
      pts[ev.pointerId] = ev.clientX;
      if (area.setPointerCapture) try { area.setPointerCapture(ev.pointerId); } catch (e) { /* already released */ }
      restart();
    });
    area.addEventListener("pointermove", function (ev) {
      if (ev.pointerType !== "touch" || !(ev.pointerId in pts) || !base) return;
      pts[ev.pointerId] = ev.clientX;
      var now = xs(), v = base.view, w = v[1] - v[0], nv;
      if (now.length >= 2 && base.xs.length >= 2) {
        var d0 = Math.abs(base.xs[1] - base.xs[0]), d = Math.abs(now[1] - now[0]);
        if (d0 < 1 || d < 1) return;
        var tm = v[0] + frac((base.xs[0] + base.xs[1]) / 2) * w, nw = w * d0 / d;
        var a = tm - frac((now[0] + now[1]) / 2) * nw;
        nv = [a, a + nw];
      } else if (now.length === 1 && base.xs.length === 1) {
        var dt = -(frac(now[0]) - frac(base.xs[0])) * w;
        nv = self.clamp(v[0] + dt, v[1] + dt);
      } else return;
      hideTip();
      self.zoomTo(nv[0], nv[1]);
    });
    function end(ev) {
      if (!(ev.pointerId in pts)) return;
      delete pts[ev.pointerId];
      restart();
    }
    area.addEventListener("pointerup", end);
    area.addEventListener("pointercancel", end);
  };
  // +/− zoom around the cursor (or the middle of the view).
  Chart.prototype.zoomBy = function (f) {
    var c = this.cursor >= 0 ? this.dev.series.t[this.cursor] : (this.view[0] + this.view[1]) / 2;
    if (c < this.view[0] || c > this.view[1]) c = (this.view[0] + this.view[1]) / 2;
    this.zoomTo(c - (c - this.view[0]) * f, c + (this.view[1] - c) * f);
  };
  Chart.prototype.hint = function (text) {
    var h = this.root.querySelector(".chart-zoom-hint");
    if (!h) return;
    h.textContent = text;
    h.hidden = false;
    clearTimeout(this.hintTimer);
    this.hintTimer = setTimeout(function () { h.hidden = true; }, 1500);
  };
  // drag: a brush; on release the view zooms to it
  Chart.prototype.down = function (ev) {
    if (ev.button !== 0) return;
    // a press engages the wheel (the chart may redraw before the click event could fire)
    if (document.activeElement !== this.area) this.area.focus({ preventScroll: true });
    this.engaged = true;
    this.brush = { x0: ev.clientX, t0: this.tAt(ev.clientX), x1: ev.clientX };
  };
  Chart.prototype.move = function (ev) {
    if (this.brush) {
      this.brush.x1 = ev.clientX;
      if (Math.abs(this.brush.x1 - this.brush.x0) > 3) { this.drawBrush(); return; }
    }
    this.hover(ev);
  };
  Chart.prototype.up = function (ev) {
    var b = this.brush;
    if (!b) return;
    this.brush = null;
    if (Math.abs(ev.clientX - b.x0) > 3) {
      var t1 = this.tAt(ev.clientX);
      this.dragged = true;
      this.zoomTo(Math.min(b.t0, t1), Math.max(b.t0, t1));
    }
  };
  Chart.prototype.drawBrush = function () {
    var g = this.g, rect = this.area.getBoundingClientRect(), sc = g.w / rect.width;
    var a = (Math.min(this.brush.x0, this.brush.x1) - rect.left) * sc, b = (Math.max(this.brush.x0, this.brush.x1) - rect.left) * sc;
    var svgEl = this.area.querySelector("svg"), old = svgEl && svgEl.querySelector(".brush");
    if (old) old.remove();
    if (svgEl) svgEl.appendChild(svg("rect", { x: Math.max(g.l, a), y: g.t, width: Math.max(0, Math.min(g.w - g.r, b) - Math.max(g.l, a)), height: g.h - g.t - g.b }, "brush"));
  };
  Chart.prototype.x = function (t, g) {
    return g.l + (t - this.view[0]) / (this.view[1] - this.view[0]) * (g.w - g.l - g.r);
  };
  Chart.prototype.y = function (v, g) { return g.t + (1 - v / this.ymax) * (g.h - g.t - g.b); };
  Chart.prototype.draw = function () {
    var g = this.geom(), self = this, s = this.dev.series;
    var root = svg("svg", { viewBox: "0 0 " + g.w + " " + g.h, width: g.w, height: g.h, "aria-hidden": "true" });
    var clipId = "clip" + this.d;
    var defs = svg("defs");
    var cp = svg("clipPath", { id: clipId });
    cp.appendChild(svg("rect", { x: g.l, y: 0, width: g.w - g.l - g.r, height: g.h }));
    defs.appendChild(cp); root.appendChild(defs);
    var ylabels = this.yLabels(), plabels = this.pLabels();
    for (var i = 0; i <= 4; i++) {
      var yy = this.y(this.ymax * i / 4, g);
      root.appendChild(svg("line", { x1: g.l, x2: g.w - g.r, y1: yy, y2: yy }, "axis"));
      var lab = svg("text", { x: g.l - 4, y: yy + 4, "text-anchor": "end" }, "ylab");
      lab.textContent = ylabels[i];
      root.appendChild(lab);
    }
    for (var q = 0; q < plabels.length; q++) {
      var pyy = this.py(this.pmax * q / 2, g);
      var plab = svg("text", { x: g.w - g.r + 4, y: pyy + 4, "text-anchor": "start" }, "phys-axis");
      plab.textContent = plabels[q];
      root.appendChild(plab);
    }
    if (plabels.length) {
      // the right axis' title, rotated along the chart's right edge
      var mid = (g.t + g.h - g.b) / 2, tx = g.w - 4;
      var title = svg("text", { x: tx, y: mid, "text-anchor": "middle", transform: "rotate(-90 " + tx + " " + mid + ")" }, "phys-title");
      title.textContent = "physical";
      root.appendChild(title);
    }
    var xn = g.narrow ? 2 : 4;
    for (var j = 0; j <= xn; j++) {
      var tt = this.view[0] + (this.view[1] - this.view[0]) * j / xn;
      var xl = svg("text", { x: this.x(tt, g), y: g.h - 6, "text-anchor": j === 0 ? "start" : j === xn ? "end" : "middle" }, "xlab");
      xl.textContent = fmtAt(Math.round(tt));
      root.appendChild(xl);
    }
    var plot = svg("g", { "clip-path": "url(#" + clipId + ")" });
    var n = s.t.length, end = this.full[1];
    var lower = new Array(n).fill(0);
    CATS.forEach(function (c, k) {
      var col = s.cat[k];
      if (!col.some(function (v) { return v > 0; })) return;
      var up = [], dn = [];
      for (var i = 0; i < n; i++) {
        var x0 = self.x(s.t[i], g), x1 = self.x(i + 1 < n ? s.t[i + 1] : end, g);
        var top = self.y(lower[i] + col[i], g), bot = self.y(lower[i], g);
        up.push(x0.toFixed(1) + "," + top.toFixed(1), x1.toFixed(1) + "," + top.toFixed(1));
        // pushed left to right, reversed below: the bottom edge is walked right to left
        dn.push(x0.toFixed(1) + "," + bot.toFixed(1), x1.toFixed(1) + "," + bot.toFixed(1));
        lower[i] += col[i];
      }
      plot.appendChild(svg("path", { d: "M" + up.join("L") + "L" + dn.reverse().join("L") + "Z" }, "cat" + k));
    });
    var ph = this.dev.physical;
    if (ph) ["used", "reserved", "capacity", "resident"].forEach(function (k, i) {
      var col = ph[k]; if (!col) return;
      var pts = [];
      for (var j = 0; j < ph.t.length; j++) if (col[j] !== null) {
        var px = self.x(ph.t[j], g), py = self.py(col[j], g);
        pts.push(px.toFixed(1) + "," + py.toFixed(1));
        // samples are observations at their instants: a dot each, joined by a dashed line
        if (ph.t.length <= 400) plot.appendChild(svg("circle", { cx: px.toFixed(1), cy: py.toFixed(1), r: 2.5 }, "phys-dot phys" + i));
      }
      if (pts.length) plot.appendChild(svg("path", { d: "M" + pts.join("L") }, "phys phys" + i));
    });
    root.appendChild(plot);
    var pk = this.dev.peak;
    if (pk) {
      var px = this.x(pk.t, g);
      if (px >= g.l && px <= g.w - g.r) {
        root.appendChild(svg("line", { x1: px, x2: px, y1: g.t, y2: g.h - g.b }, "peakline"));
        // the label stays inside the plot: right of the line in the left half, left of it after
        var right = px < (g.l + g.w - g.r) / 2;
        var pl = svg("text", { x: right ? px + 4 : px - 4, y: g.t + 12, "text-anchor": right ? "start" : "end" }, "peaklabel");
        pl.textContent = "peak " + pk.text + (g.narrow ? "" : " at " + pk.at);
        root.appendChild(pl);
      }
    }
    if (this.cursor >= 0) {
      var cx = this.x(s.t[this.cursor], g);
      root.appendChild(svg("line", { x1: cx, x2: cx, y1: g.t, y2: g.h - g.b }, "cursor"));
    }
    this.area.textContent = "";
    this.area.appendChild(root);
    this.g = g;
  };
  Chart.prototype.rows = function (i) {
    var s = this.dev.series, rows = [["time", fmtAt(s.t[i])], ["live", fmtBytes(s.total[i])]];
    CATS.forEach(function (c, k) { if (s.cat[k][i] > 0) rows.push(["  " + c, fmtBytes(s.cat[k][i]), "num"]); });
    var sp = spanAt(s.t[i]);
    rows.push(["span", sp >= 0 ? spanPath(sp) : "-"]);
    var ph = this.dev.physical;
    if (ph) {
      var j = bsearch(ph.t, s.t[i]);
      if (j >= 0) ["used", "reserved", "capacity", "resident"].forEach(function (k) {
        if (ph[k] && ph[k][j] !== null) rows.push(["physical " + k + " (" + fmtAt(ph.t[j]) + ")", fmtBytes(ph[k][j])]);
      });
    }
    if (this.isPeak(i)) rows.push(["", "the peak: " + this.dev.peak.text]);
    return rows;
  };
  Chart.prototype.isPeak = function (i) {
    var pk = this.dev.peak, s = this.dev.series;
    return !!pk && s.t[i] === pk.t && s.total[i] === pk.bytes;
  };
  // the memory event nearest the pointer (in pixels); among events within 3 px of it, the
  // highest — so the peak line reads the peak
  Chart.prototype.nearest = function (clientX) {
    var g = this.g, rect = this.area.getBoundingClientRect(), ts = this.dev.series.t, tot = this.dev.series.total;
    if (!ts.length) return -1;
    var px = (clientX - rect.left) * g.w / rect.width;
    var t = this.tAt(clientX), i = bsearch(ts, t);
    var best = i < 0 ? 0 : i;
    if (i + 1 < ts.length && (i < 0 || Math.abs(this.x(ts[i + 1], g) - px) < Math.abs(this.x(ts[i], g) - px))) best = i + 1;
    var bx = this.x(ts[best], g);
    if (Math.abs(bx - px) > 3) return best;
    for (var k = best - 1; k >= 0 && Math.abs(this.x(ts[k], g) - px) <= 3; k--) if (tot[k] > tot[best]) best = k;
    for (var m = best + 1; m < ts.length && Math.abs(this.x(ts[m], g) - px) <= 3; m++) if (tot[m] > tot[best]) best = m;
    return best;
  };
  Chart.prototype.hover = function (ev) {
    var i = this.nearest(ev.clientX);
    if (i < 0) { hideTip(); return; }
    this.cursor = i;
    this.draw();
    showTip(this.rows(i), ev.clientX, ev.clientY);
  };
  Chart.prototype.focusPoint = function (i) {
    var s = this.dev.series;
    if (!s.t.length) return;
    this.cursor = Math.max(0, Math.min(s.t.length - 1, i));
    var t = s.t[this.cursor];
    if (t < this.view[0] || t > this.view[1]) {
      var w = this.view[1] - this.view[0];
      this.view = this.clamp(t - w / 2, t + w / 2);
    }
    this.draw();
    var rect = this.area.getBoundingClientRect();
    showTip(this.rows(this.cursor), rect.left + this.x(t, this.g) * rect.width / this.g.w, rect.top + 10);
  };
  Chart.prototype.peakIndex = function () {
    var s = this.dev.series;
    for (var i = 0; i < s.t.length; i++) if (this.isPeak(i)) return i;
    return -1;
  };
  Chart.prototype.key = function (ev) {
    var step = ev.shiftKey ? 10 : 1, i = this.cursor < 0 ? 0 : this.cursor;
    if (ev.key === "ArrowRight") this.focusPoint(i + step);
    else if (ev.key === "ArrowLeft") this.focusPoint(i - step);
    else if (ev.key === "Home") this.focusPoint(0);
    else if (ev.key === "End") this.focusPoint(this.dev.series.t.length - 1);
    else if (ev.key === "p") this.jump();
    else if (ev.key === "Enter" || ev.key === " ") this.liveSet();
    else if (ev.key === "Escape") { hideTip(); this.reset(); }
    else if (ev.key === "+" || ev.key === "=") this.zoomBy(0.5);
    else if (ev.key === "-") this.zoomBy(2);
    else return;
    ev.preventDefault();
  };
  Chart.prototype.jump = function () {
    var i = this.peakIndex();
    if (i < 0) return;
    var pk = this.dev.peak, w = (this.full[1] - this.full[0]) / 8;
    this.view = this.clamp(pk.t - w / 2, pk.t + w / 2); this.root.dataset.zoomed = "true";
    this.focusPoint(i);
    this.area.focus();
    this.liveSet();
  };
  Chart.prototype.reset = function () { this.view = this.full.slice(); this.root.dataset.zoomed = "false"; this.draw(); };
  Chart.prototype.liveSet = function () {
    if (this.cursor < 0) return;
    var panel = document.getElementById("liveset");
    if (!panel) return;
    panel.textContent = "";
    var s = this.dev.series, t = s.t[this.cursor], dev = this.dev;
    if (this.isPeak(this.cursor)) {
      var p = el("p", null, "The peak of " + dev.name + ": " + dev.peak.text + " at " + dev.peak.at +
        ". Every storage live then is in the table ");
      var a = el("a", null, "“held at the peak”");
      a.href = "#held-" + this.d;
      var d = this.d;
      a.addEventListener("click", function () { // the rows are collapsed under their groups: open them
        var t = document.getElementById("held-" + d), det = t && t.closest("details");
        if (det) det.open = true;
      });
      p.appendChild(a);
      p.appendChild(document.createTextNode(" (one row per storage, under the groups) and the icicle."));
      panel.appendChild(p);
      return;
    }
    var L = data.lifetimes;
    if (!L || !L.embedded) {
      panel.appendChild(el("p", null, "What was live at " + fmtAt(t) + " is not embedded in this report (" +
        (L ? L.count : 0) + " storage lifetimes, more than it carries); the live set at each peak is in its table."));
      return;
    }
    var rows = [], total = 0;
    for (var i = 0; i < L.bytes.length; i++) {
      if (L.dev[i] !== this.d) continue;
      if (L.start[i] <= t && (L.end[i] === null || L.end[i] > t)) { rows.push(i); total += L.bytes[i]; }
    }
    rows.sort(function (a, b) { return L.bytes[b] - L.bytes[a] || L.start[a] - L.start[b]; });
    panel.appendChild(el("h3", null, "Live on " + dev.name + " after every event at or before " + fmtAt(t) +
      ": " + rows.length + " storages, " + fmtBytes(total)));
    var shown = rows.slice(0, 50);
    var wrap = el("div", "table-wrap"), tb = el("table"), head = el("tr");
    ["BYTES", "CATEGORY", "PASS", "SPAN", "SHAPE/DTYPE", "LABEL"].forEach(function (h) { head.appendChild(el("th", null, h)); });
    var thead = el("thead"); thead.appendChild(head); tb.appendChild(thead);
    var body = el("tbody");
    shown.forEach(function (i) {
      var tr = el("tr");
      tr.appendChild(el("td", "num", fmtBytes(L.bytes[i])));
      tr.appendChild(el("td", null, CATS[L.cat[i]] + (L.inferred[i] ? "*" : "")));
      tr.appendChild(el("td", null, L.pass[i] || (L.pre[i] ? "before capture" : "-")));
      tr.appendChild(el("td", null, L.strings[L.span[i]]));
      tr.appendChild(el("td", null, L.strings[L.shape[i]]));
      tr.appendChild(el("td", null, L.strings[L.label[i]]));
      body.appendChild(tr);
    });
    tb.appendChild(body); wrap.appendChild(tb); panel.appendChild(wrap);
    if (rows.length > shown.length) {
      var rest = 0;
      rows.slice(shown.length).forEach(function (i) { rest += L.bytes[i]; });
      panel.appendChild(el("p", "footer", (rows.length - shown.length) + " more = " + fmtBytes(rest) +
        " (each at most " + fmtBytes(L.bytes[rows[shown.length]]) + ")"));
    }
    panel.appendChild(el("p", "footer", "* category inferred from the pass it was allocated in"));
  };

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
      if (info) info.textContent = (narrow ? narrow + " spans too narrow to draw at this zoom; " : "") +
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
      lab.appendChild(document.createTextNode("hide the probe's own frames (" + probeTotal + " samples)"));
      box.querySelector(".flame-controls").appendChild(lab);
    }
    trees.forEach(function (t, i) {
      var b = el("button", null, t.label + " (" + t.samples + " samples)");
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
      if (!t.merged[i]) r.push(["self (innermost)", t.self[i] + " samples, " + share(t.self[i], total)]);
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
          "aria-label": F.strings[t.name[n]] + (t.op[n] >= 0 ? " [" + F.strings[t.op[n]] + "]" : "") + ": " + val(cur, n) + " samples, " + share(val(cur, n), totalOf(cur)) + " of " + t.label + (t.kind[n] === "probe" ? " (the probe's own work)" : "") },
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
      info.textContent = t.label + ": " + t.samples + " samples" + (t.samples < 100 ? " (few samples: shares are rough)" : "") +
        (t.rooted_at >= 0 ? "; rooted at the step's frame " + F.strings[t.rooted_at] + " (the frames above it, process start-up, left out)" : "") +
        (hideProbe ? "; the probe's own " + probeUnder[cur][0] + " samples hidden, shares of the user's " + totalOf(cur) : "") +
        (zoom ? "; zoomed into " + F.strings[t.name[zoom]] + " (" + share(val(cur, zoom), totalOf(cur)) + ")" : "") +
        (narrow ? "; " + narrow + " frames too narrow to draw at this zoom" : "") +
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

  // ---- sortable tables ----
  function sortable(table) {
    var heads = table.querySelectorAll("th");
    heads.forEach(function (th, col) {
      var b = th.querySelector("button");
      if (!b) return;
      b.addEventListener("click", function () {
        var numeric = b.dataset.numeric === "true";
        var dir = th.getAttribute("aria-sort") === "descending" ? "ascending" : "descending";
        heads.forEach(function (h) { h.setAttribute("aria-sort", "none"); });
        th.setAttribute("aria-sort", dir);
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var key = function (r) {
          var c = r.cells[col]; if (!c) return numeric ? -Infinity : "";
          if (numeric) { var v = c.dataset.sort; return v === undefined ? -Infinity : Number(v); }
          return c.textContent;
        };
        rows.sort(function (a, b2) {
          var x = key(a), y = key(b2), r = x < y ? -1 : x > y ? 1 : 0;
          return dir === "ascending" ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }

  // ---- theme ----
  var themes = ["auto", "light", "dark"], theme = 0;
  var tb = document.getElementById("theme");
  tb.addEventListener("click", function () {
    theme = (theme + 1) % 3;
    if (themes[theme] === "auto") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = themes[theme];
    tb.textContent = "Theme: " + themes[theme];
  });

  // ---- start ----
  document.querySelectorAll(".chart").forEach(function (c) {
    var d = Number(c.dataset.device);
    if (!data.devices[d]) return;
    var ch = new Chart(c, d);
    charts[d] = ch;
    c.querySelector(".jump").addEventListener("click", function () { ch.jump(); });
    c.querySelector(".reset").addEventListener("click", function () { ch.reset(); });
    c.querySelectorAll(".chart-zoom").forEach(function (b) {
      b.addEventListener("click", function () { ch.zoomBy(b.dataset.zoom === "in" ? 0.5 : 2); });
    });
    // the page's formatter must say what the CLI says
    var pk = data.devices[d].peak;
    if (pk && (fmtBytes(pk.bytes) !== pk.text || fmtAt(pk.t) !== pk.at))
      console.error("report formatter disagrees with trace-format: " + fmtBytes(pk.bytes) + " / " + fmtAt(pk.t));
  });
  document.querySelectorAll(".icicle.held").forEach(function (b) { heldIcicle(b, Number(b.dataset.device)); });
  document.querySelectorAll(".icicle.spans").forEach(function (b) { b.tabIndex = 0; spanIcicle(b); });
  document.querySelectorAll("table.sortable").forEach(sortable);
  // ---- a filter box and a CSV download over each table with more than a few rows ----
  function csvCell(t) { t = t.replace(/\s+/g, " ").trim(); return /[",\n]/.test(t) ? '"' + t.replace(/"/g, '""') + '"' : t; }
  function toolbar(table) {
    var rows = table.tBodies[0] ? table.tBodies[0].rows : [];
    if (rows.length < 8) return;
    var bar = el("div", "table-tools");
    var box = el("input");
    box.type = "search"; box.placeholder = "filter rows"; box.setAttribute("aria-label", "filter the rows of " + (table.id || "this table"));
    var count = el("span", "muted");
    function apply() {
      var q = box.value.toLowerCase(), shown = 0;
      for (var i = 0; i < rows.length; i++) {
        var hit = !q || rows[i].textContent.toLowerCase().indexOf(q) >= 0;
        rows[i].hidden = !hit; if (hit) shown++;
      }
      count.textContent = q ? shown + " of " + rows.length + " rows" : "";
    }
    box.addEventListener("input", apply);
    var a = el("a", "csv", "CSV");
    a.setAttribute("download", (table.id || "table") + ".csv");
    a.href = "#";
    a.addEventListener("click", function () {
      var lines = [];
      var head = table.tHead ? table.tHead.rows[0] : null;
      if (head) lines.push([].map.call(head.cells, function (c) { return csvCell(c.textContent); }).join(","));
      for (var i = 0; i < rows.length; i++) if (!rows[i].hidden) lines.push([].map.call(rows[i].cells, function (c) { return csvCell(c.textContent); }).join(","));
      a.href = "data:text/csv;charset=utf-8," + encodeURIComponent(lines.join("\n") + "\n");
    });
    bar.appendChild(box); bar.appendChild(a); bar.appendChild(count);
    var wrap = table.parentNode;
    wrap.parentNode.insertBefore(bar, wrap);
  }
  document.querySelectorAll("table.sortable").forEach(toolbar);
  document.querySelectorAll(".flame").forEach(flameGraph);
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { charts.forEach(function (c) { if (c) c.draw(); }); }, 100);
  });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") hideTip(); });
  document.documentElement.dataset.renderMs = String(Math.round(performance.now()));
  document.documentElement.dataset.ready = "1";
})();
