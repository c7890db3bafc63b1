// Draws the on-CPU profile's flame graph with d3-flame-graph (its UMD
// build puts the module in the global "flamegraph"), sized to the page,
// and marks the element with the number of frames drawn, which the
// rendering test reads.
function netdoctorFlame(el, data) {
  var chart = flamegraph.default()
    .width(Math.max(el.clientWidth || 0, 320))
    .cellHeight(18)
    .minFrameSize(2)
    .sort(true)
    .title("")
    .selfValue(false);
  d3.select(el).datum(data).call(chart);
  // The first drawing is final at once: the library grows each frame
  // to its width in an animation, which a page printed, saved or
  // rendered headless would catch half-way. Each frame's group already
  // has its width; its rectangle takes it now. Zooming still animates.
  d3.select(el).selectAll("g.frame").each(function () {
    var g = d3.select(this);
    g.interrupt();
    g.select("rect").interrupt().attr("width", g.attr("width"));
  });
  el.setAttribute("data-frames", String(el.querySelectorAll("g.frame").length));
}
