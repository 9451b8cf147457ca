// candle-graph report, part 4 of 5: sortable tables, their filter box and CSV download.
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
      count.textContent = q ? shown + " of " + plural(rows.length, "row", "rows") : "";
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
