//! Bakes the WIT of `onebrain:plugin` into one `generate!` macro per world.
//!
//! Why: each plugin crate must run wit-bindgen for its own world only (a
//! component that carries the type section of a world it does not implement
//! fails to componentize), and a plugin author's crate has no path to our
//! `wit/` folder. So the SDK carries the WIT text inline, and its export
//! macros expand `generate!` inside the plugin crate.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

/// The WIT version this SDK speaks; written into every plugin's
/// `onebrain:api-version` custom section, read by the host before it instantiates.
const API_VERSION: &str = "0.4.0";

const WORLDS: [(&str, &str); 4] = [
    ("reward", "__onebrain_wit_reward"),
    ("domain-adapter", "__onebrain_wit_domain_adapter"),
    ("diagnostic-parser", "__onebrain_wit_diagnostic_parser"),
    ("faithfulness-checker", "__onebrain_wit_faithfulness_checker"),
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let wit_dir = manifest.join(format!("../../wit/since_v{API_VERSION}"));
    println!("cargo:rerun-if-changed={}", wit_dir.display());

    let mut files: Vec<PathBuf> = fs::read_dir(&wit_dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", wit_dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wit"))
        .collect();
    files.sort();

    // One inline document: a single `package` line, then every file's body.
    let mut wit = format!("package onebrain:plugin@{API_VERSION};\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let text = fs::read_to_string(f).unwrap();
        for line in text.lines() {
            if !line.trim_start().starts_with("package ") {
                wit.push_str(line);
                wit.push('\n');
            }
        }
    }
    assert!(!wit.contains("\"#"), "WIT text must not contain a raw-string terminator");

    let mut out = String::new();
    writeln!(out, "/// The WIT version this SDK was built against.").unwrap();
    writeln!(out, "pub const API_VERSION: &str = {API_VERSION:?};").unwrap();
    writeln!(out, "#[doc(hidden)]").unwrap();
    writeln!(out, "pub const API_VERSION_BYTES: [u8; {}] = *b{API_VERSION:?};", API_VERSION.len()).unwrap();
    for (world, mac) in WORLDS {
        writeln!(
            out,
            r####"#[doc(hidden)]
#[macro_export]
macro_rules! {mac} {{
    () => {{
        $crate::__private::wit_bindgen::generate!({{
            inline: r#"{wit}"#,
            world: "onebrain:plugin/{world}@{API_VERSION}",
            runtime_path: "::onebrain_sdk::__private::wit_bindgen::rt",
        }});
    }};
}}"####
        )
        .unwrap();
    }
    let dest = PathBuf::from(env::var("OUT_DIR").unwrap()).join("wit_macros.rs");
    fs::write(dest, out).unwrap();
}
