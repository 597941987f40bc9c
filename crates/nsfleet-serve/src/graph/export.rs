//! The graph for other tools: Graphviz's DOT, Mermaid, and JSON.

use super::model::{Graph, Kind};

/// `graph "lab" { ... }`: switches as boxes, routers as circles, hosts as ellipses,
/// what is outside the fleet dashed; each edge labelled with its interfaces.
pub fn dot(g: &Graph) -> String {
    let mut out = format!(
        "graph {} {{\n  node [fontname=\"sans-serif\"];\n",
        quote(&g.name)
    );
    for n in &g.nodes {
        let shape = match n.kind {
            Kind::Switch => "shape=box",
            Kind::Router => "shape=circle",
            Kind::Host => "shape=ellipse",
            Kind::External => "shape=ellipse, style=dashed",
        };
        let mut label = vec![n.name.clone()];
        label.extend(n.interfaces.iter().cloned());
        out.push_str(&format!(
            "  {} [{shape}, label={}];\n",
            quote(&n.name),
            quote(&label.join("\n"))
        ));
    }
    for l in &g.links {
        let style = if l.impaired { ", color=orange" } else { "" };
        out.push_str(&format!(
            "  {} -- {} [taillabel={}, headlabel={}{style}];\n",
            quote(&g.nodes[l.a].name),
            quote(&g.nodes[l.b].name),
            quote(&l.a_iface),
            quote(&l.b_iface)
        ));
    }
    out.push_str("}\n");
    out
}

/// A DOT identifier in double quotes, with `"` and `\` escaped and newlines as `\n`.
fn quote(s: &str) -> String {
    let escaped = s
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("\"{escaped}\"")
}

/// `graph LR`: switches as rectangles, routers as circles, hosts as rounded boxes; node
/// ids are `n0`, `n1`, ... (Mermaid's ids take no dots or dashes), labelled with names.
pub fn mermaid(g: &Graph) -> String {
    let mut out = String::from("graph LR\n");
    for (i, n) in g.nodes.iter().enumerate() {
        let label = n.name.replace('"', "#quot;");
        let shape = match n.kind {
            Kind::Switch => format!("n{i}[\"{label}\"]"),
            Kind::Router => format!("n{i}((\"{label}\"))"),
            Kind::Host => format!("n{i}(\"{label}\")"),
            Kind::External => format!("n{i}>\"{label}\"]"),
        };
        out.push_str(&format!("  {shape}\n"));
    }
    for l in &g.links {
        let label = format!("{} - {}", l.a_iface, l.b_iface).replace('"', "#quot;");
        let line = if l.impaired { "-.-" } else { "---" };
        out.push_str(&format!("  n{} {line}|\"{label}\"| n{}\n", l.a, l.b));
    }
    out
}

/// Nodes and links as JSON, links naming their ends by node name.
pub fn json(g: &Graph) -> serde_json::Value {
    let links: Vec<serde_json::Value> = (g.links.iter())
        .map(|l| {
            serde_json::json!({
                "a": format!("{}:{}", g.nodes[l.a].name, l.a_iface),
                "b": format!("{}:{}", g.nodes[l.b].name, l.b_iface),
                "kind": l.kind,
                "impaired": l.impaired,
            })
        })
        .collect();
    serde_json::json!({ "name": g.name, "nodes": g.nodes, "links": links })
}
