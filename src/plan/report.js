// The evictions table: filters, sort and paging over the embedded rows. Only one page of rows is
// in the DOM at a time, so a plan of any size opens at once. The URL fragment
// (#plugin=…&outcome=…&node=…&pod=…&page=…) sets the filters, so a filtered view can be linked.
(function () {
  "use strict";
  var PAGE = 100;
  var rows = JSON.parse(document.getElementById("plan-data").textContent);
  var $ = function (id) { return document.getElementById(id); };
  var state = { plugin: "", outcome: "", node: "", pod: "", sort: -1, desc: false, page: 0 };
  var view = rows;

  function fill(select, column) {
    var seen = {};
    rows.forEach(function (r) { seen[r[column]] = (seen[r[column]] || 0) + 1; });
    Object.keys(seen).sort().forEach(function (v) {
      var o = document.createElement("option");
      o.value = v;
      o.textContent = v + " (" + seen[v] + ")";
      select.appendChild(o);
    });
  }

  function readHash() {
    var h = location.hash.replace(/^#/, "");
    h.split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i < 0) return;
      var k = decodeURIComponent(kv.slice(0, i)), v = decodeURIComponent(kv.slice(i + 1));
      if (k === "page") state.page = Math.max(0, parseInt(v, 10) || 0);
      else if (k in state && typeof state[k] === "string") state[k] = v;
    });
  }

  function writeHash() {
    var parts = [];
    ["plugin", "outcome", "node", "pod"].forEach(function (k) {
      if (state[k]) parts.push(k + "=" + encodeURIComponent(state[k]));
    });
    if (state.page) parts.push("page=" + state.page);
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
  }

  function recompute() {
    var node = state.node.toLowerCase(), pod = state.pod.toLowerCase();
    view = rows.filter(function (r) {
      return (!state.plugin || r[3] === state.plugin) &&
        (!state.outcome || r[4] === state.outcome) &&
        (!node || r[1].toLowerCase().indexOf(node) >= 0) &&
        (!pod || r[0].toLowerCase().indexOf(pod) >= 0);
    });
    if (state.sort >= 0) {
      var k = state.sort, d = state.desc ? -1 : 1;
      view = view.slice().sort(function (a, b) { return a[k] < b[k] ? -d : a[k] > b[k] ? d : 0; });
    }
  }

  function render() {
    var pages = Math.max(1, Math.ceil(view.length / PAGE));
    if (state.page >= pages) state.page = pages - 1;
    var start = state.page * PAGE, end = Math.min(view.length, start + PAGE);
    var body = document.createElement("tbody");
    for (var i = start; i < end; i++) {
      var r = view[i], tr = document.createElement("tr");
      for (var c = 0; c < 7; c++) {
        var td = document.createElement("td");
        td.textContent = r[c];
        if (c === 4) td.className = "o-" + r[c];
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    var table = $("rows");
    table.replaceChild(body, table.tBodies[0]);
    $("shown").innerHTML = "";
    var s = $("shown");
    s.appendChild(document.createTextNode("rows "));
    [["first-row", view.length ? start + 1 : 0], ["last-row", end], ["match-count", view.length],
      ["total-count", rows.length], ["page-count", pages]].forEach(function (p, i) {
      if (i === 1) s.appendChild(document.createTextNode("–"));
      if (i === 2) s.appendChild(document.createTextNode(" of "));
      if (i === 3) s.appendChild(document.createTextNode(" matching (total "));
      if (i === 4) s.appendChild(document.createTextNode("), pages "));
      var b = document.createElement("b");
      b.id = p[0];
      b.textContent = p[1];
      s.appendChild(b);
    });
    $("prev").disabled = state.page === 0;
    $("next").disabled = state.page + 1 >= pages;
    writeHash();
  }

  function update() { state.page = 0; recompute(); render(); }

  fill($("f-plugin"), 3);
  fill($("f-outcome"), 4);
  readHash();
  $("f-plugin").value = state.plugin;
  $("f-outcome").value = state.outcome;
  $("f-node").value = state.node;
  $("f-pod").value = state.pod;
  $("f-plugin").onchange = function () { state.plugin = this.value; update(); };
  $("f-outcome").onchange = function () { state.outcome = this.value; update(); };
  $("f-node").oninput = function () { state.node = this.value; update(); };
  $("f-pod").oninput = function () { state.pod = this.value; update(); };
  $("prev").onclick = function () { state.page--; render(); };
  $("next").onclick = function () { state.page++; render(); };
  Array.prototype.forEach.call(document.querySelectorAll("th[data-key]"), function (th) {
    th.onclick = function () {
      var k = parseInt(th.getAttribute("data-key"), 10);
      state.desc = state.sort === k ? !state.desc : false;
      state.sort = k;
      Array.prototype.forEach.call(document.querySelectorAll("th[data-key]"), function (o) { o.className = ""; });
      th.className = state.desc ? "desc" : "asc";
      update();
    };
  });
  recompute();
  render();
})();
