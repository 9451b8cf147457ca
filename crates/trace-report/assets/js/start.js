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
  function stepChart(fig) {
    var svg = fig.querySelector("svg");
    if (!svg) return;
    var W = Number(svg.dataset.w), H = svg.viewBox.baseVal.height;
    var x0 = 0, w = W, drag = null;
    function set(nx, nw) {
      w = Math.max(W / 64, Math.min(W, nw));
      x0 = Math.max(0, Math.min(W - w, nx));
      svg.setAttribute("viewBox", x0 + " 0 " + w + " " + H);
    }
    function at(ev) {
      var r = svg.getBoundingClientRect();
      return x0 + (ev.clientX - r.left) / Math.max(1, r.width) * w;
    }
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var c = at(ev), k = ev.deltaY < 0 ? 0.8 : 1.25;
      set(c - (c - x0) * k, w * k);
    }, { passive: false });
    svg.addEventListener("pointerdown", function (ev) { drag = { x: ev.clientX, x0: x0 }; svg.setPointerCapture(ev.pointerId); });
    svg.addEventListener("pointermove", function (ev) {
      if (!drag) return;
      var r = svg.getBoundingClientRect();
      set(drag.x0 - (ev.clientX - drag.x) / Math.max(1, r.width) * w, w);
    });
    svg.addEventListener("pointerup", function () { drag = null; });
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
