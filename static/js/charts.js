// Renders plotly figures embedded as JSON next to their containers (no CDN: plotly is vendored).
(function () {
  document.querySelectorAll(".chart").forEach(function (fig) {
    var div = fig.querySelector(".plot");
    var data = fig.querySelector("script[type='application/json']");
    if (!div || !data || !window.Plotly) return;
    var figure = JSON.parse(data.textContent);
    window.Plotly.newPlot(div, figure.data, figure.layout, {responsive: true, displaylogo: false});
  });
})();
