// Draws every <canvas class="xychart">: the series in its data-series
// attribute ([{"name": "...", "points": [...]}, ...]) against the values
// of its data-x attribute, labelled with data-xunit: capacity's curves
// of latency and goodput against the offered rate, each step a dot.
// Inlined only in pages that have such a chart; no library, no network.
(function () {
  var colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];
  function fmt(v) {
    if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (v >= 1e3) return (v / 1e3).toFixed(1) + "k";
    if (v > 0 && v < 1) return v.toFixed(2);
    if (v < 10) return v.toFixed(1);
    return String(Math.round(v));
  }
  function draw(c) {
    var series = JSON.parse(c.getAttribute("data-series"));
    var xs = JSON.parse(c.getAttribute("data-x"));
    var unit = c.getAttribute("data-xunit") || "";
    var ratio = window.devicePixelRatio || 1;
    var w = c.clientWidth || 600, h = c.clientHeight || 240;
    c.width = w * ratio; c.height = h * ratio;
    var g = c.getContext("2d");
    g.scale(ratio, ratio);
    var left = 48, right = 12, top = 8, bottom = 22;
    var maxv = 0, minx = Infinity, maxx = -Infinity;
    series.forEach(function (s) { s.points.forEach(function (v) { maxv = Math.max(maxv, v); }); });
    xs.forEach(function (x) { minx = Math.min(minx, x); maxx = Math.max(maxx, x); });
    if (maxv === 0) maxv = 1;
    if (!isFinite(minx)) { minx = 0; maxx = 1; }
    if (maxx === minx) { minx = 0; maxx = maxx || 1; }
    function px(x) { return left + (w - left - right) * (x - minx) / (maxx - minx); }
    function py(v) { return top + (h - top - bottom) * (1 - v / maxv); }
    g.strokeStyle = "#ccc"; g.fillStyle = "#555"; g.font = "11px sans-serif"; g.lineWidth = 1;
    for (var i = 0; i <= 4; i++) {
      var y = top + (h - top - bottom) * i / 4;
      g.beginPath(); g.moveTo(left, y); g.lineTo(w - right, y); g.stroke();
      g.fillText(fmt(maxv * (4 - i) / 4), 2, y + 4);
      var xv = minx + (maxx - minx) * i / 4;
      g.fillText(fmt(xv) + unit, px(xv) - (i === 4 ? 30 : 8), h - 6);
    }
    var drawn = 0;
    series.forEach(function (s, k) {
      var col = colors[k % colors.length];
      g.strokeStyle = col; g.fillStyle = col; g.lineWidth = 2; g.beginPath();
      s.points.forEach(function (v, j) {
        if (j === 0) g.moveTo(px(xs[j]), py(v)); else g.lineTo(px(xs[j]), py(v));
      });
      g.stroke();
      s.points.forEach(function (v, j) {
        g.beginPath(); g.arc(px(xs[j]), py(v), 3, 0, 2 * Math.PI); g.fill();
        drawn++;
      });
    });
    c.setAttribute("data-drawn", String(drawn));
    var legend = c.previousElementSibling;
    if (legend && legend.className === "legend") {
      var spans = legend.getElementsByTagName("span");
      for (var j = 0; j < spans.length; j++) spans[j].style.color = colors[j % colors.length];
    }
  }
  var charts = document.querySelectorAll("canvas.xychart");
  for (var i = 0; i < charts.length; i++) draw(charts[i]);
})();
