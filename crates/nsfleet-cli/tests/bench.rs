//! The bench lab from the outside: a `--quick` run of every scenario writes a valid result
//! file, the report of them renders in headless Chromium with every chart and no console
//! error, and `bench compare` exits 0, 1, 125 and 128 as `git bisect run` needs.

mod harness;

use harness::*;
use nsfleet_results::{Better, Metric, Results};

const SCENARIOS: [&str; 10] = [
    "create", "teardown", "churn", "routers", "setns", "traffic", "stats", "images", "user",
    "serve",
];

#[test]
fn every_quick_scenario_writes_results_and_the_report_renders_in_chromium() {
    let env = Env::new("benchq");
    let mut charts = 0;
    let mut files = Vec::new();
    for s in SCENARIOS {
        let file = env.files.join(format!("{s}.json"));
        let out = env.ok(&[
            "bench",
            s,
            "--quick",
            "--json",
            "-o",
            file.to_str().unwrap(),
        ]);
        let printed: Results =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{s}: {e}: {out}"));
        let written = Results::load(&file).unwrap();
        assert_eq!(printed.scenario, s);
        assert_eq!(written.metrics.len(), printed.metrics.len());
        assert!(
            printed.metrics.len() >= 4,
            "{s}: {:?}",
            printed.metrics.keys()
        );
        assert!(!printed.machine.kernel.is_empty() && printed.machine.cpus > 0);
        let finite = printed
            .metrics
            .values()
            .filter(|m| m.median.is_finite())
            .count();
        assert!(finite >= 4, "{s}: too few figures measured");
        charts += printed.charts.len();
        files.push(file);
    }
    let html = env.files.join("report.html");
    let mut args = vec![
        "report".to_string(),
        "-o".into(),
        html.display().to_string(),
    ];
    args.extend(files.iter().map(|f| f.display().to_string()));
    env.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "the report must open without a network"
    );

    let out = (nsfleet_bench::browser::headless(&env.files.join("chromium")).unwrap())
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("chromium is installed (Debian's chromium; .ci/run installs it)");
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    // The page's own script counts the charts it finds once loaded.
    assert!(
        dom.contains(&format!("data-charts=\"{charts}\"")),
        "expected {charts} charts in the rendered page"
    );
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
}

fn result_file(env: &Env, name: &str, rate: f64) -> String {
    let mut r = Results::new("create", Default::default(), serde_json::json!({}));
    r.metric(
        "nsfleet_nodes_per_s",
        Metric::new("nodes/s", Better::Higher, vec![rate, rate]),
    );
    r.metric(
        "raw_nodes_per_s",
        Metric::new("nodes/s", Better::Neither, vec![1.0]),
    );
    env.file(name, &serde_json::to_string(&r).unwrap())
        .display()
        .to_string()
}

fn compare_exit(env: &Env, base: &str, cand: &str) -> i32 {
    env.run(&["bench", "compare", base, cand, "--threshold", "10%"])
        .status
        .code()
        .unwrap()
}

#[test]
fn compare_exits_for_git_bisect_run() {
    let env = Env::new("compare");
    let base = result_file(&env, "base.json", 1000.0);
    assert_eq!(
        compare_exit(&env, &base, &result_file(&env, "same.json", 950.0)),
        0
    );
    assert_eq!(
        compare_exit(&env, &base, &result_file(&env, "faster.json", 2000.0)),
        0
    );
    assert_eq!(
        compare_exit(&env, &base, &result_file(&env, "slower.json", 800.0)),
        1
    );
    assert_eq!(
        compare_exit(&env, &base, &result_file(&env, "nan.json", f64::NAN)),
        125
    );
    let missing = env.files.join("never-written.json");
    assert_eq!(compare_exit(&env, &base, missing.to_str().unwrap()), 125);
    let empty = env.file("empty.json", "").display().to_string();
    assert_eq!(compare_exit(&env, &base, &empty), 125);
    // An unusable baseline aborts a bisect instead of judging every commit bad.
    assert_eq!(compare_exit(&env, &empty, &base), 128);
    let out = env.run(&[
        "bench",
        "compare",
        &base,
        &result_file(&env, "slow2.json", 500.0),
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("nsfleet_nodes_per_s") && table.contains("REGRESSION"),
        "{table}"
    );
}
