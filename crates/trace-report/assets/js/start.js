// candle-graph report, part 5 of 5: the theme button, and drawing everything once the page loads.
  // ---- theme ----
  var themes = ["auto", "light", "dark"], theme = 0;
  var tb = document.getElementById("theme");
  tb.addEventListener("click", function () {
    theme = (theme + 1) % 3;
    if (themes[theme] === "auto") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = themes[theme];
    tb.textContent = "Theme: " + themes[theme];
  });

  // ---- step charts (a run's series): zoom along the steps by the SVG's view box ----
  // As on the memory chart: the wheel zooms with ctrl/⌘ held (a trackpad pinch arrives so) or
  // once the chart was clicked, otherwise the page scrolls; a mouse drag pans; on a touch screen
  // one finger pans sideways and two pinch (the page keeps vertical scrolling: touch-action pan-y).
  function stepChart(fig) {
    var svg = fig.querySelector("svg");
    if (!svg) return;
    var W = Number(svg.dataset.w), H = svg.viewBox.baseVal.height;
    var x0 = 0, w = W, drag = null, engaged = false, pts = {}, base = null, hintTimer = null;
    var hint = fig.querySelector(".chart-zoom-hint");
    function set(nx, nw) {
      w = Math.max(W / 64, Math.min(W, nw));
      x0 = Math.max(0, Math.min(W - w, nx));
      svg.setAttribute("viewBox", x0 + " 0 " + w + " " + H);
      fig.dataset.zoomed = String(w < W);
    }
    function frac(clientX) {
      var r = svg.getBoundingClientRect();
      return (clientX - r.left) / Math.max(1, r.width);
    }
    function say(text) {
      if (!hint) return;
      hint.textContent = text;
      hint.hidden = false;
      clearTimeout(hintTimer);
      hintTimer = setTimeout(function () { hint.hidden = true; }, 1500);
    }
    svg.addEventListener("focus", function () { engaged = true; });
    svg.addEventListener("blur", function () { engaged = false; });
    svg.addEventListener("wheel", function (ev) {
      if (!(ev.ctrlKey || ev.metaKey || engaged)) { say("ctrl + wheel (⌘ on a Mac) or click the chart first to zoom"); return; }
      ev.preventDefault();
      var c = x0 + frac(ev.clientX) * w, k = ev.deltaY < 0 ? 0.8 : 1.25;
      set(c - (c - x0) * k, w * k);
    }, { passive: false });
    function xs() { return Object.keys(pts).map(function (k) { return pts[k]; }); }
    function restart() { base = { x0: x0, w: w, xs: xs() }; }
    svg.addEventListener("pointerdown", function (ev) {
      if (ev.pointerType === "touch") {
        pts[ev.pointerId] = ev.clientX;
        restart();
      } else {
        if (ev.button !== 0) return;
        if (document.activeElement !== svg) svg.focus({ preventScroll: true });
        engaged = true;
        drag = { x: ev.clientX, x0: x0 };
      }
      if (svg.setPointerCapture) try { svg.setPointerCapture(ev.pointerId); } catch (e) { /* already released */ }
    });
    svg.addEventListener("pointermove", function (ev) {
      if (ev.pointerType === "touch") {
        if (!(ev.pointerId in pts) || !base) return;
        pts[ev.pointerId] = ev.clientX;
        var now = xs();
        if (now.length >= 2 && base.xs.length >= 2) {
          var d0 = Math.abs(base.xs[1] - base.xs[0]), d = Math.abs(now[1] - now[0]);
          if (d0 < 1 || d < 1) return;
          var cm = base.x0 + frac((base.xs[0] + base.xs[1]) / 2) * base.w, nw = base.w * d0 / d;
          set(cm - frac((now[0] + now[1]) / 2) * nw, nw);
        } else if (now.length === 1 && base.xs.length === 1) {
          set(base.x0 - (frac(now[0]) - frac(base.xs[0])) * base.w, base.w);
        }
        return;
      }
      if (!drag) return;
      set(drag.x0 - (frac(ev.clientX) - frac(drag.x)) * w, w);
    });
    function end(ev) {
      if (ev.pointerType === "touch") {
        if (!(ev.pointerId in pts)) return;
        delete pts[ev.pointerId];
        restart();
      } else drag = null;
    }
    svg.addEventListener("pointerup", end);
    svg.addEventListener("pointercancel", end);
    svg.addEventListener("dblclick", function () { set(0, W); });
    svg.addEventListener("keydown", function (ev) {
      if (ev.key === "Escape") set(0, W);
      else if (ev.key === "+" || ev.key === "=") set(x0 + w / 4, w / 2);
      else if (ev.key === "-") set(x0 - w / 2, w * 2);
    });
    fig.querySelectorAll(".step-zoom").forEach(function (b) {
      b.addEventListener("click", function () {
        if (b.dataset.zoom === "in") set(x0 + w / 4, w / 2); else set(x0 - w / 2, w * 2);
      });
    });
    fig.querySelector(".step-reset").addEventListener("click", function () { set(0, W); });
    fig.dataset.zoomed = "false";
  }

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
  document.querySelectorAll("table.sortable").forEach(toolbar);
  document.querySelectorAll(".flame").forEach(flameGraph);
  document.querySelectorAll("figure.stepchart").forEach(stepChart);
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { charts.forEach(function (c) { if (c) c.draw(); }); }, 100);
  });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") hideTip(); });
  document.documentElement.dataset.renderMs = String(Math.round(performance.now()));
  document.documentElement.dataset.ready = "1";
