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
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { charts.forEach(function (c) { if (c) c.draw(); }); }, 100);
  });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") hideTip(); });
  document.documentElement.dataset.renderMs = String(Math.round(performance.now()));
  document.documentElement.dataset.ready = "1";
