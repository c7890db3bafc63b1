// Draws every <canvas class="chart"> from the JSON in its data-series
// attribute: [{"name": "...", "points": [...]}, ...], one point a second.
// No library, no network: the report must open offline, on a phone.
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
    var ratio = window.devicePixelRatio || 1;
    var w = c.clientWidth || 600, h = c.clientHeight || 200;
    c.width = w * ratio; c.height = h * ratio;
    var g = c.getContext("2d");
    g.scale(ratio, ratio);
    var left = 48, right = 8, top = 8, bottom = 22;
    var n = 0, maxv = 0;
    series.forEach(function (s) {
      n = Math.max(n, s.points.length);
      s.points.forEach(function (v) { maxv = Math.max(maxv, v); });
    });
    if (maxv === 0) maxv = 1;
    g.strokeStyle = "#ccc"; g.fillStyle = "#555"; g.font = "11px sans-serif"; g.lineWidth = 1;
    for (var i = 0; i <= 4; i++) {
      var y = top + (h - top - bottom) * i / 4;
      g.beginPath(); g.moveTo(left, y); g.lineTo(w - right, y); g.stroke();
      g.fillText(fmt(maxv * (4 - i) / 4), 2, y + 4);
    }
    for (var t = 0; t < n; t += Math.max(1, Math.ceil(n / 10))) {
      g.fillText(t + "s", left + (w - left - right) * t / Math.max(1, n - 1) - 6, h - 6);
    }
    var drawn = 0;
    series.forEach(function (s, k) {
      g.strokeStyle = colors[k % colors.length]; g.lineWidth = 2; g.beginPath();
      s.points.forEach(function (v, i) {
        var x = left + (w - left - right) * i / Math.max(1, n - 1);
        var y = top + (h - top - bottom) * (1 - v / maxv);
        if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
        drawn++;
      });
      g.stroke();
    });
    c.setAttribute("data-drawn", String(drawn));
    var legend = c.previousElementSibling;
    if (legend && legend.className === "legend") {
      var spans = legend.getElementsByTagName("span");
      for (var j = 0; j < spans.length; j++) spans[j].style.color = colors[j % colors.length];
    }
  }
  var charts = document.querySelectorAll("canvas.chart");
  for (var i = 0; i < charts.length; i++) draw(charts[i]);
})();
