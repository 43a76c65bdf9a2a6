//! Fuzzing plugin manifests, as campaigns with counts (`tests/fuzz/campaign.rs`;
//! `ONEBRAIN_FUZZ_CASES` for a long one).
//!
//! A `plugin.toml` is plugin-authored text. Mutated manifests (the bundled plugins' and the
//! corpus's, `tests/fuzz/corpus/manifests`) and random text never panic the parser, and what
//! it accepts keeps its promises: a name that is an identifier, a version and a description
//! without control characters, a component path inside the folder; printed back to TOML it
//! parses to the same manifest. The same texts installed as plugin folders never panic
//! discovery, and a folder is either listed or skipped with a warning, which is one escaped
//! line.

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use onebrain_runtime::{escape_line, PluginManifest, PluginRegistry};
use proptest::prelude::*;

#[path = "../../../tests/fuzz/campaign.rs"]
mod campaign;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn seeds() -> &'static [String] {
    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut paths: Vec<PathBuf> = Vec::new();
        for dir in ["plugins", "tests/fuzz/corpus/manifests"] {
            for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
                let p = e.path();
                let file = if p.is_dir() { p.join("plugin.toml") } else { p };
                if file.extension().is_some_and(|x| x == "toml") && file.is_file() {
                    paths.push(file);
                }
            }
        }
        paths.sort();
        assert!(paths.len() >= 10, "the bundled manifests and the corpus: {paths:?}");
        paths.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect()
    })
}

#[derive(Clone, Debug)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, &'static str),
    Char(usize, char),
}

const PIECES: &[&str] = &[
    "\"", "'", "'''", "\"\"\"", "=", "[", "]", "{", "}", "\n", "name", "version", "world", "component", "description",
    "[permissions]", "[permissions.read-dirs]", "read-dirs", "\"/data\" = \"data\"", "..", "/", "\\", "\\u0000", "\\u001b",
    "reward", "domain-adapter", "diagnostic-parser", "faithfulness-checker", "#", "0.1.0", "x.wasm", "é", "\u{202e}", "\t",
];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..12).prop_map(|(i, n)| Edit::Delete(i, n)),
        (any::<usize>(), prop::sample::select(PIECES)).prop_map(|(i, p)| Edit::Insert(i, p)),
        (any::<usize>(), any::<char>()).prop_map(|(i, c)| Edit::Char(i, c)),
    ]
}

fn mutate(src: &str, edits: &[Edit]) -> String {
    let mut s: Vec<char> = src.chars().collect();
    for e in edits {
        let n = s.len() + 1;
        match *e {
            Edit::Delete(i, k) => {
                let at = (i % n).min(s.len());
                let end = (at + k).min(s.len());
                s.drain(at..end);
            }
            Edit::Insert(i, p) => {
                let at = i % n;
                s.splice(at..at, p.chars());
            }
            Edit::Char(i, c) => s.insert(i % n, c),
        }
    }
    s.into_iter().collect()
}

/// What `parse` promises of a manifest it accepts.
fn check_accepted(m: &PluginManifest, text: &str) -> Result<(), TestCaseError> {
    let id = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    prop_assert!(!m.name.is_empty() && m.name.len() <= 64 && m.name.chars().all(id), "name {:?} from {text:?}", m.name);
    prop_assert!(!m.version.is_empty() && !m.version.chars().any(char::is_control), "version {:?}", m.version);
    prop_assert!(!m.description.chars().any(char::is_control), "description {:?}", m.description);
    prop_assert!(
        m.component.components().all(|c| matches!(c, Component::Normal(_))),
        "component {:?} leaves the folder",
        m.component
    );
    // Printed back, it parses to the same manifest.
    let printed = toml::to_string(m).map_err(|e| TestCaseError::fail(format!("does not print: {e}")))?;
    let again = PluginManifest::parse(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
    // `dir` is where the loader found it, not part of the text.
    prop_assert_eq!(again, PluginManifest { dir: PathBuf::new(), ..m.clone() });
    Ok(())
}

fn parse_case(text: &str) -> Result<(), TestCaseError> {
    match PluginManifest::parse(text) {
        Ok(m) => check_accepted(&m, text),
        // A refusal is one line a terminal can show as it is.
        Err(e) => {
            prop_assert!(!e.is_empty());
            let shown = escape_line(&e);
            prop_assert!(!shown.chars().any(|c| c.is_control() && c != '\n'), "{shown:?}");
            Ok(())
        }
    }
}

#[test]
fn every_seed_parses_or_is_refused_as_it_should() {
    for s in seeds() {
        let hostile = s.contains("name = \"hostile\"");
        assert_eq!(PluginManifest::parse(s).is_err(), hostile, "{s}");
        parse_case(s).unwrap();
    }
}

#[test]
fn fuzz_manifest_text() {
    let case = (any::<usize>(), prop::collection::vec(edit(), 1..8));
    campaign::run("runtime/manifest-text", 2048, case, |(seed, edits)| {
        let seeds = seeds();
        parse_case(&mutate(&seeds[seed % seeds.len()], &edits))
    });
}

#[test]
fn fuzz_random_manifest_text() {
    campaign::run("runtime/manifest-random", 1024, any::<String>(), |s| parse_case(&s));
}

/// Installs the text as `plugins/<folder>/plugin.toml` in a fresh folder and discovers it.
fn discover_case(folder: &str, text: &str) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    let dir = plugins.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plugin.toml"), text).unwrap();
    let reg = PluginRegistry::discover(&[plugins]).map_err(|e| TestCaseError::fail(format!("discover failed: {e}")))?;
    let listed = reg.list();
    let warnings = reg.warnings();
    // Listed or skipped with a warning, never both, never neither.
    prop_assert_eq!(listed.len() + warnings.len(), 1, "listed {:?}, warnings {:?}", listed, warnings);
    for w in &warnings {
        prop_assert!(!w.chars().any(|c| c.is_control()), "an unescaped warning: {w:?}");
    }
    for p in &listed {
        prop_assert_eq!(&p.name, folder);
        let m = reg.get(&p.name).map_err(|e| TestCaseError::fail(e.to_string()))?;
        check_accepted(m, text)?;
        // No component is there: inspecting says so, it does not fail or panic.
        let d = reg.inspect(&p.name).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(d.component_error.is_some());
    }
    Ok(())
}

#[test]
fn fuzz_manifest_folders() {
    let case = (any::<usize>(), prop::collection::vec(edit(), 0..6));
    campaign::run("runtime/manifest-folders", 256, case, |(seed, edits)| {
        let seeds = seeds();
        let text = mutate(&seeds[seed % seeds.len()], &edits);
        // The folder takes the manifest's name where it has one, so the name check passes and
        // the rest of the manifest is what is judged.
        let folder = PluginManifest::parse(&text).map(|m| m.name).unwrap_or_else(|_| "plugin".into());
        discover_case(&folder, &text)
    });
}
