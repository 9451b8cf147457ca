// candle-graph report, part 2 of 5: the memory charts (zoom, pan, touch, tooltip, live set).
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
      item.appendChild(document.createTextNode("physical " + k + " (" + plural(ph.samples, "sample", "samples") + ")"));
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
    // within a millionth of the whole of an end is that end (zooming in then out by the same
    // factor comes back to the whole timeline, whatever the rounding)
    var eps = (full[1] - full[0]) * 1e-6;
    a = a - full[0] <= eps ? full[0] : a; b = full[1] - b <= eps ? full[1] : b;
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
  // highest, and of equal ones the peak — so the peak line reads the peak (a step can return
  // to the peak's bytes right after it)
  Chart.prototype.nearest = function (clientX) {
    var g = this.g, rect = this.area.getBoundingClientRect(), ts = this.dev.series.t, tot = this.dev.series.total;
    if (!ts.length) return -1;
    var px = (clientX - rect.left) * g.w / rect.width;
    var t = this.tAt(clientX), i = bsearch(ts, t);
    var best = i < 0 ? 0 : i;
    if (i + 1 < ts.length && (i < 0 || Math.abs(this.x(ts[i + 1], g) - px) < Math.abs(this.x(ts[i], g) - px))) best = i + 1;
    var bx = this.x(ts[best], g);
    if (Math.abs(bx - px) > 3) return best;
    var self = this, higher = function (j) { return tot[j] > tot[best] || (tot[j] === tot[best] && self.isPeak(j)); };
    var from = best;
    for (var k = from - 1; k >= 0 && Math.abs(this.x(ts[k], g) - px) <= 3; k--) if (higher(k)) best = k;
    for (var m = from + 1; m < ts.length && Math.abs(this.x(ts[m], g) - px) <= 3; m++) if (higher(m)) best = m;
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
      ": " + plural(rows.length, "storage", "storages") + ", " + fmtBytes(total)));
    var shown = rows.slice(0, 50);
    var wrap = el("div", "table-wrap"), tb = el("table", "cards"), head = el("tr");
    var heads = ["BYTES", "CATEGORY", "PASS", "SPAN", "SHAPE/DTYPE", "LABEL"];
    heads.forEach(function (h) { head.appendChild(el("th", null, h)); });
    var thead = el("thead"); thead.appendChild(head); tb.appendChild(thead);
    var body = el("tbody");
    shown.forEach(function (i) {
      var tr = el("tr");
      [[fmtBytes(L.bytes[i]), "num"], [CATS[L.cat[i]] + (L.inferred[i] ? "*" : "")],
        [L.pass[i] || (L.pre[i] ? "before capture" : "-")], [L.strings[L.span[i]]],
        [L.strings[L.shape[i]]], [L.strings[L.label[i]]]].forEach(function (c, k) {
        var td = el("td", c[1] || null, c[0]);
        td.dataset.label = heads[k]; // the column's name where a row is a card
        tr.appendChild(td);
      });
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

