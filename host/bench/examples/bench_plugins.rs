//! Prints `bench_plugins` as JSON: `cargo run --release -p onebrain-bench --example bench_plugins`
//! (after `scripts/build-plugins.sh`). `onebrain bench plugins` calls the same function.

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let iterations = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let options = onebrain_bench::plugins::BenchOptions { plugins_dir: root.join("plugins"), iterations };
    match onebrain_bench::plugins::bench_plugins(&options) {
        Ok(r) => println!("{}", serde_json::to_string_pretty(&r).expect("serialisable")),
        Err(e) => {
            eprintln!("bench_plugins: {e}");
            std::process::exit(1);
        }
    }
}
