//! Hand-written SVG plots: lines, a heatmap, box plots, grouped bars. No plotting crate: each
//! plot is a few dozen elements, and the text stays diffable.

use std::fmt::Write as _;

const W: f64 = 640.0;
const H: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 160.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
/// Colour-blind-safe palette (Okabe–Ito).
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn open(title: &str, w: f64, h: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    s
}

/// The plot area's y for a value in [0, 1].
fn y_of(v: f64) -> f64 {
    TOP + (H - TOP - BOTTOM) * (1.0 - v.clamp(0.0, 1.0))
}

fn y_axis(s: &mut String, label: &str) {
    for i in 0..=4 {
        let v = i as f64 / 4.0;
        let y = y_of(v);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
            W - RIGHT
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{v:.2}</text>"#,
            LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0,
        esc(label)
    );
}

fn legend(s: &mut String, names: &[String]) {
    for (i, n) in names.iter().enumerate() {
        let y = TOP + 10.0 + 18.0 * i as f64;
        let x = W - RIGHT + 14.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{:.1}" width="12" height="12" fill="{}"/>"#,
            y - 10.0,
            PALETTE[i % PALETTE.len()]
        );
        let _ = writeln!(s, r#"<text x="{}" y="{y:.1}">{}</text>"#, x + 18.0, esc(n));
    }
}

/// One line per series over x = 0..n−1, values in [0, 1]; values that are not finite are
/// left out.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<f64>)],
) -> String {
    let mut s = open(title, W, H);
    y_axis(&mut s, y_label);
    let n = series
        .iter()
        .map(|(_, v)| v.len())
        .max()
        .unwrap_or(1)
        .max(2);
    let x_of = |i: usize| LEFT + (W - LEFT - RIGHT) * i as f64 / (n - 1) as f64;
    for i in 0..n {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{i}</text>"#,
            x_of(i),
            H - BOTTOM + 18.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 10.0,
        esc(x_label)
    );
    for (k, (_, values)) in series.iter().enumerate() {
        let colour = PALETTE[k % PALETTE.len()];
        // A value that is not a number (a rate of nothing) is left out, not drawn at NaN.
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(i, v)| format!("{:.1},{:.1}", x_of(i), y_of(*v)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
        for (i, v) in values.iter().enumerate().filter(|(_, v)| v.is_finite()) {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{v:.3}</title></circle>"#,
                x_of(i),
                y_of(*v)
            );
        }
    }
    legend(
        &mut s,
        &series.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
    );
    s.push_str("</svg>\n");
    s
}

/// A heatmap of counts: `rows` × `cols`, shaded by the share of each column's total.
pub fn heatmap(
    title: &str,
    x_label: &str,
    rows: &[String],
    cols: &[String],
    counts: &[Vec<usize>],
) -> String {
    let cell_w = 60.0;
    let cell_h = 26.0;
    let left = 150.0;
    let top = 46.0;
    let w = left + cell_w * cols.len().max(1) as f64 + 30.0;
    let h = top + cell_h * rows.len() as f64 + 50.0;
    let mut s = open(title, w, h);
    for (j, c) in cols.iter().enumerate() {
        let total: usize = counts.iter().map(|r| r.get(j).copied().unwrap_or(0)).sum();
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            left + cell_w * (j as f64 + 0.5),
            top + cell_h * rows.len() as f64 + 16.0,
            esc(c)
        );
        for (i, row) in counts.iter().enumerate() {
            let n = row.get(j).copied().unwrap_or(0);
            let share = if total > 0 {
                n as f64 / total as f64
            } else {
                0.0
            };
            // White (0) to deep blue (1).
            let shade = |a: f64, b: f64| (a + (b - a) * share).round() as u8;
            let fill = format!(
                "#{:02x}{:02x}{:02x}",
                shade(255.0, 8.0),
                shade(255.0, 69.0),
                shade(255.0, 148.0)
            );
            let (x, y) = (left + cell_w * j as f64, top + cell_h * i as f64);
            let _ = writeln!(
                s,
                r##"<rect x="{x:.1}" y="{y:.1}" width="{cell_w}" height="{cell_h}" fill="{fill}" stroke="#fff"><title>{n} of {total}</title></rect>"##
            );
            let ink = if share > 0.5 { "white" } else { "black" };
            if n > 0 {
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="{ink}">{n}</text>"#,
                    x + cell_w / 2.0,
                    y + cell_h / 2.0 + 4.0
                );
            }
        }
    }
    for (i, r) in rows.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 6.0,
            top + cell_h * (i as f64 + 0.5) + 4.0,
            esc(r)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        left + cell_w * cols.len() as f64 / 2.0,
        h - 8.0,
        esc(x_label)
    );
    s.push_str("</svg>\n");
    s
}

/// Five-number summary of a sample (min, q1, median, q3, max), linear interpolation.
pub fn five_numbers(values: &[f64]) -> Option<[f64; 5]> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let pos = p * (v.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
    };
    Some([v[0], q(0.25), q(0.5), q(0.75), v[v.len() - 1]])
}

/// Box plots (whiskers at min and max, every point drawn) of values in [0, 1], one per group.
pub fn box_plot(title: &str, y_label: &str, groups: &[(String, Vec<f64>)]) -> String {
    let mut s = open(title, W, H);
    y_axis(&mut s, y_label);
    let n = groups.len().max(1);
    let slot = (W - LEFT - RIGHT) / n as f64;
    for (k, (name, values)) in groups.iter().enumerate() {
        let cx = LEFT + slot * (k as f64 + 0.5);
        let colour = PALETTE[k % PALETTE.len()];
        let _ = writeln!(
            s,
            r#"<text x="{cx:.1}" y="{}" text-anchor="middle">{} (n={})</text>"#,
            H - BOTTOM + 18.0,
            esc(name),
            values.len()
        );
        if let Some([lo, q1, med, q3, hi]) = five_numbers(values) {
            let bw = (slot * 0.4).min(60.0);
            let _ = writeln!(
                s,
                r#"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="{colour}"/>"#,
                y_of(lo),
                y_of(hi)
            );
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{bw:.1}" height="{:.1}" fill="{colour}" fill-opacity="0.3" stroke="{colour}"/>"#,
                cx - bw / 2.0,
                y_of(q3),
                (y_of(q1) - y_of(q3)).max(1.0)
            );
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{colour}" stroke-width="2"/>"#,
                cx - bw / 2.0,
                cx + bw / 2.0,
                y_of(med),
                y_of(med)
            );
            for (i, v) in values.iter().enumerate() {
                // Deterministic jitter so equal scores stay visible.
                let dx = ((i * 37) % 17) as f64 - 8.0;
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{colour}"><title>{v:.3}</title></circle>"#,
                    cx + dx,
                    y_of(*v)
                );
            }
        }
    }
    s.push_str("</svg>\n");
    s
}

/// Grouped bars: one group per category, one bar per series, values in [0, 1].
pub fn grouped_bars(
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> String {
    let mut s = open(title, W, H);
    y_axis(&mut s, y_label);
    let groups = categories.len().max(1);
    let slot = (W - LEFT - RIGHT) / groups as f64;
    let bar = slot * 0.8 / series.len().max(1) as f64;
    for (g, c) in categories.iter().enumerate() {
        let x0 = LEFT + slot * g as f64 + slot * 0.1;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            LEFT + slot * (g as f64 + 0.5),
            H - BOTTOM + 18.0,
            esc(c)
        );
        for (k, (_, values)) in series.iter().enumerate() {
            let v = values.get(g).copied().unwrap_or(0.0);
            let y = y_of(v);
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{v:.3}</title></rect>"#,
                x0 + bar * k as f64,
                (bar - 2.0).max(1.0),
                (y_of(0.0) - y).max(0.0),
                PALETTE[k % PALETTE.len()]
            );
        }
    }
    legend(
        &mut s,
        &series.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_numbers_by_hand() {
        assert_eq!(
            five_numbers(&[4.0, 1.0, 3.0, 2.0, 5.0]),
            Some([1.0, 2.0, 3.0, 4.0, 5.0])
        );
        assert_eq!(five_numbers(&[0.0, 1.0]), Some([0.0, 0.25, 0.5, 0.75, 1.0]));
        assert_eq!(five_numbers(&[]), None);
    }

    #[test]
    fn plots_are_well_formed_svg() {
        let series = vec![("a<b".to_string(), vec![0.1, 0.5, 1.0])];
        for svg in [
            line_chart("t", "h", "CSR", &series),
            heatmap(
                "t",
                "h",
                &["syntax".into()],
                &["0".into(), "1".into()],
                &[vec![2, 0]],
            ),
            box_plot(
                "t",
                "s",
                &[("g".into(), vec![0.2, 0.4]), ("empty".into(), vec![])],
            ),
            grouped_bars("t", "y", &["bw".into()], &series),
        ] {
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
            assert!(!svg.contains("a<b"), "text is escaped");
            assert!(!svg.contains("NaN"));
        }
    }
}
