//! Helpers shared by the unit tests: find the model files, or skip with a message.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value};

use crate::paths::{resolve_model, ModelSource};

/// The GGUF path of a model the setup fetches, or `None` (with a printed reason) when it
/// is absent so the test can skip. CI runs the setup first, so there the tests run.
pub(crate) fn model_path(file: &str) -> Option<std::path::PathBuf> {
    match resolve_model(std::path::Path::new(file)) {
        Ok(ModelSource::Gguf(p)) => Some(p),
        Ok(other) => panic!("{file} resolved to {other:?}"),
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            None
        }
    }
}

/// The metadata of a GGUF model file, or `None` when the file is absent.
pub(crate) fn gguf_metadata(file: &str) -> Option<HashMap<String, Value>> {
    let path = model_path(file)?;
    let mut f = std::fs::File::open(&path).unwrap();
    Some(Content::read(&mut f).unwrap().metadata)
}
