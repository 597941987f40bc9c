//! How an item's cost grows with the number already made, fitted from a rate-against-
//! count curve: seed 003's question (does the 10,000th router cost more than the first?),
//! answered with two numbers instead of a picture.
//!
//! A bench step of n items at an average rate r(n) took T(n) = n / r(n). If the k-th item
//! costs `a + b·k`, then T(n) = a·n + b·n²/2, so T(n)/n = 1/r(n) = a + (b/2)·n: a straight
//! line in n, fitted by least squares. `b` is the quadratic term per item; zero is flat.

/// `a` and `b` of the fit, in seconds, and how well the line fits (R²).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Growth {
    /// The cost of the first item.
    pub first_s: f64,
    /// What each item already made adds to the next one's cost.
    pub per_made_s: f64,
    /// The fit's coefficient of determination (1: every step on the line).
    pub r2: f64,
}

/// The fit of `(count, rate)` points; `None` without two distinct positive counts.
pub fn fit(points: &[(f64, f64)]) -> Option<Growth> {
    let xy: Vec<(f64, f64)> = (points.iter())
        .filter(|(n, r)| *n > 0.0 && *r > 0.0 && n.is_finite() && r.is_finite())
        .map(|(n, r)| (*n, 1.0 / r))
        .collect();
    let m = xy.len() as f64;
    let (mx, my) = (
        xy.iter().map(|p| p.0).sum::<f64>() / m,
        xy.iter().map(|p| p.1).sum::<f64>() / m,
    );
    let sxx: f64 = xy.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    if xy.len() < 2 || sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = xy.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let syy: f64 = xy.iter().map(|(_, y)| (y - my).powi(2)).sum();
    let residual: f64 = (xy.iter())
        .map(|(x, y)| (y - intercept - slope * x).powi(2))
        .sum();
    let r2 = if syy > 0.0 { 1.0 - residual / syy } else { 1.0 };
    Some(Growth {
        first_s: intercept,
        per_made_s: 2.0 * slope,
        r2,
    })
}

impl Growth {
    /// The time to make `n` items from none, as the fit has it.
    pub fn time_to(&self, n: f64) -> f64 {
        self.first_s * n + self.per_made_s / 2.0 * n * n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_that_grows_with_the_count_is_found_and_a_flat_one_is_flat() {
        // The k-th item costs 1 ms + 0.1 us per item already made.
        let (a, b) = (1e-3, 1e-7);
        let rate = |n: f64| n / (a * n + b * n * n / 2.0);
        let pts: Vec<(f64, f64)> = [1000.0, 2000.0, 5000.0, 10000.0]
            .iter()
            .map(|&n| (n, rate(n)))
            .collect();
        let g = fit(&pts).unwrap();
        assert!(
            (g.first_s - a).abs() < 1e-9 && (g.per_made_s - b).abs() < 1e-12,
            "{g:?}"
        );
        assert!((g.r2 - 1.0).abs() < 1e-9);
        assert!((g.time_to(50_000.0) - (a * 5e4 + b * 2.5e9 / 2.0)).abs() < 1e-6);
        let flat = fit(&[(1000.0, 500.0), (10000.0, 500.0)]).unwrap();
        assert!(flat.per_made_s.abs() < 1e-15 && (flat.first_s - 2e-3).abs() < 1e-12);
        assert!(fit(&[(1000.0, 500.0)]).is_none());
        assert!(fit(&[(1000.0, 500.0), (1000.0, 400.0)]).is_none());
    }
}
