// The drawing of a fleet's graph, shared by `nsfleet graph`'s page and the workbench:
// `drawGraph(data, hooks)` draws `data` (nodes laid out with x and y, links by node index)
// into the page's #canvas, #tip, #search, #title and #counts, with zoom, pan, search and
// hover; `hooks.node(n)` and `hooks.link(l, line)` are called when a node or a link is
// chosen (clicked, or Enter on it). It returns what following the live fleet needs.
"use strict";
function drawGraph(data, hooks) {
  hooks = hooks || {};
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.getElementById("canvas"), view = document.getElementById("view");
  const tip = document.getElementById("tip");
  const counters = {};
  document.getElementById("title").textContent = "fleet " + data.name;
  document.getElementById("counts").textContent =
    data.nodes.length + " nodes, " + data.links.length + " links";

  // Links first, so that nodes are drawn over them.
  const linkEls = [];
  const linksOf = {};
  const linkLayer = document.getElementById("links");
  data.links.forEach((l, i) => {
    const a = data.nodes[l.a], b = data.nodes[l.b];
    const line = document.createElementNS(NS, "line");
    line.setAttribute("x1", a.x); line.setAttribute("y1", a.y);
    line.setAttribute("x2", b.x); line.setAttribute("y2", b.y);
    line.setAttribute("class", "link " + l.kind + (l.impaired ? " impaired" : ""));
    line.dataset.a = a.name + ":" + l.a_iface;
    line.dataset.b = b.name + ":" + l.b_iface;
    if (hooks.link) line.addEventListener("click", (e) => { e.stopPropagation(); hooks.link(l, line); });
    linkLayer.appendChild(line);
    linkEls.push(line);
    for (const end of [line.dataset.a, line.dataset.b]) (linksOf[end] = linksOf[end] || []).push(line);
  });

  const nodeEls = {};
  const nodeLayer = document.getElementById("nodes");
  const names = document.getElementById("names");
  // Switches last: a switch with many ports is drawn over them.
  const drawOrder = data.nodes.filter((n) => n.kind !== "switch").concat(data.nodes.filter((n) => n.kind === "switch"));
  drawOrder.forEach((n) => {
    const g = document.createElementNS(NS, "g");
    g.setAttribute("class", "node " + n.kind + (n.impairments.length ? " impaired" : ""));
    g.setAttribute("transform", "translate(" + n.x + "," + n.y + ")");
    g.dataset.name = n.name;
    let shape;
    if (n.kind === "switch") {
      shape = document.createElementNS(NS, "rect");
      shape.setAttribute("x", -9); shape.setAttribute("y", -9);
      shape.setAttribute("width", 18); shape.setAttribute("height", 18); shape.setAttribute("rx", 2);
    } else {
      shape = document.createElementNS(NS, "circle");
      shape.setAttribute("r", n.kind === "router" ? 9 : 7);
    }
    shape.setAttribute("class", "shape");
    g.appendChild(shape);
    const label = document.createElementNS(NS, "text");
    label.setAttribute("class", "label");
    label.setAttribute("y", 22);
    label.textContent = n.name;
    g.appendChild(label);
    if (hooks.node && n.kind !== "external") {
      // Reachable by keyboard and named for screen readers: Tab to it, Enter opens it.
      g.setAttribute("tabindex", "0");
      g.setAttribute("role", "button");
      g.setAttribute("aria-label", n.kind + " " + n.name);
      g.addEventListener("click", (e) => { e.stopPropagation(); hooks.node(n); });
      g.addEventListener("keydown", (e) => { if (e.key === "Enter") hooks.node(n); });
    }
    g.addEventListener("mousemove", (e) => showTip(n, e));
    g.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    nodeLayer.appendChild(g);
    nodeEls[n.name] = g;
    const o = document.createElement("option"); o.value = n.name; names.appendChild(o);
  });

  function showTip(n, e) {
    const lines = [n.name + "  (" + n.kind + ")"];
    for (const i of n.interfaces) {
      lines.push("  " + i);
      const c = counters[n.name + ":" + i.split(" ")[0]];
      if (c) lines.push("    rx " + c.rx_packets + " pkts  tx " + c.tx_packets + " pkts  drops " + (c.rx_dropped + c.tx_dropped));
    }
    for (const m of n.impairments) lines.push("  impaired " + m);
    tip.textContent = lines.join("\n");
    tip.style.display = "block";
    tip.style.left = (e.clientX + 14) + "px";
    tip.style.top = (e.clientY + 14) + "px";
  }

  // Zoom and pan: one transform on the view. Nodes never shrink below a few pixels: far
  // out, each is drawn larger in the drawing's units.
  let scale = 1, tx = 0, ty = 0, grown = 1;
  function apply() {
    view.setAttribute("transform", "translate(" + tx + "," + ty + ") scale(" + scale + ")");
    const grow = Math.max(1, 3 / (7 * scale));
    if (Math.abs(grow - grown) / grown > 0.1) {
      grown = grow;
      data.nodes.forEach((n) => nodeEls[n.name].setAttribute("transform",
        "translate(" + n.x + "," + n.y + ") scale(" + grow + ")"));
    }
    // Names once there is room for them: when nodes are, on average, 35 pixels apart.
    svg.classList.toggle("far", spacing * scale < 35);
  }
  const xs = data.nodes.map((n) => n.x), ys = data.nodes.map((n) => n.y);
  const minX = Math.min(...xs) - 30, maxX = Math.max(...xs) + 30;
  const minY = Math.min(...ys) - 30, maxY = Math.max(...ys) + 40;
  // The average distance between nodes, in the drawing's units.
  const spacing = Math.sqrt((maxX - minX) * (maxY - minY) / Math.max(data.nodes.length, 1));
  function fit() {
    const r = svg.getBoundingClientRect();
    scale = Math.min(r.width / (maxX - minX), r.height / (maxY - minY), 2.5);
    tx = (r.width - (maxX - minX) * scale) / 2 - minX * scale;
    ty = (r.height - (maxY - minY) * scale) / 2 - minY * scale;
    apply();
  }
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect();
    const px = e.clientX - r.left, py = e.clientY - r.top;
    const f = Math.exp(-e.deltaY * 0.0015);
    tx = px - (px - tx) * f; ty = py - (py - ty) * f; scale *= f;
    apply();
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", (e) => { drag = [e.clientX - tx, e.clientY - ty]; svg.classList.add("dragging"); });
  window.addEventListener("mousemove", (e) => { if (drag) { tx = e.clientX - drag[0]; ty = e.clientY - drag[1]; apply(); } });
  window.addEventListener("mouseup", () => { drag = null; svg.classList.remove("dragging"); });

  document.getElementById("search").addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    const q = e.target.value.trim();
    const n = data.nodes.find((n) => n.name === q) || data.nodes.find((n) => n.name.startsWith(q));
    document.querySelectorAll(".node.found").forEach((g) => g.classList.remove("found"));
    if (!n) { e.target.style.background = "#fdd"; return; }
    e.target.style.background = "";
    nodeEls[n.name].classList.add("found");
    const r = svg.getBoundingClientRect();
    scale = Math.max(scale, 1.5);
    tx = r.width / 2 - n.x * scale; ty = r.height / 2 - n.y * scale;
    apply();
  });

  // A running fleet: its state now, and its events as they happen.
  function setDown(end, down) {
    (linksOf[end] || []).forEach((l) => l.classList.toggle("down", down));
  }
  function applyState(s) {
    document.querySelectorAll(".link.down").forEach((l) => l.classList.remove("down"));
    s.down.forEach((end) => setDown(end, true));
    // Impairments as they are now (`nsfleet impair` changes them on a live fleet).
    linkEls.forEach((l) => l.classList.toggle("impaired", !!(s.impaired[l.dataset.a] || s.impaired[l.dataset.b])));
    const byNode = {};
    for (const [end, what] of Object.entries(s.impaired)) {
      const at = end.indexOf(":");
      (byNode[end.slice(0, at)] = byNode[end.slice(0, at)] || []).push(end.slice(at + 1) + ": " + what);
    }
    data.nodes.forEach((n) => {
      if (n.kind === "external") return;
      n.impairments = byNode[n.name] || [];
      nodeEls[n.name].classList.toggle("impaired", n.impairments.length > 0);
    });
    Object.assign(counters, s.counters);
    document.body.dataset.down = s.down.length;
    document.body.dataset.impaired = Object.keys(s.impaired).length;
  }

  svg.dataset.nodes = data.nodes.length;
  svg.dataset.links = data.links.length;
  return { applyState, setDown, fit, nodeEls, linkEls, linksOf, counters };
}
