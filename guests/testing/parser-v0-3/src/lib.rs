//! A diagnostic parser built against API 0.3.0, as one written before 0.4.0 was: no SDK,
//! wit-bindgen straight from the frozen `wit/since_v0.3.0`, the version section written by
//! hand. It proves that 0.3.0 parsers keep loading (and parsing) after 0.4.0 gave the world
//! `review`, and that one listed as a reviewer is refused. Its answer: one diagnostic that
//! repeats the planner's stdout and counts the native diagnostics.

wit_bindgen::generate!({ path: "../../../wit/since_v0.3.0", world: "diagnostic-parser" });

use onebrain::plugin::types::{Category, Severity};

/// The section the host reads before it instantiates.
#[used]
#[link_section = "onebrain:api-version"]
static API_VERSION: [u8; 5] = *b"0.3.0";

struct Echo;

impl Guest for Echo {
    fn parse(raw: SolverOutput, native: Vec<Diagnostic>) -> Result<Vec<Diagnostic>, String> {
        Ok(vec![Diagnostic {
            category: Category::SolverError,
            severity: Severity::Error,
            message: format!("0.3.0 parser read `{}` after {} native", raw.stdout, native.len()),
            file: None,
            line: None,
            column: None,
        }])
    }
}

export!(Echo);
