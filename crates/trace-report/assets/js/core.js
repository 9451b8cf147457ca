// candle-graph report, part 1 of 5: the data block, the formatting rules, DOM helpers, the
// tooltip and the spans. html.rs joins the parts inside one function (one scope, strict mode).
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
  // a counted noun: "1 sample", "2 samples" (trace-format's `count`)
  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }
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

