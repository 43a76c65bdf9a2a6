//! Finding the model files that `scripts/setup.sh` fetched, and checking them cheaply.
//!
//! The setup script verifies the sha256 of each download; here a size and magic check
//! catches truncated or swapped files in milliseconds instead of hashing 500 MB per load.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use crate::{config::DEFAULT_MODEL_FILE, config::QUICK_MODEL_FILE, config::TEST_MODEL_FILE, Error, Result};

/// Environment variable naming a directory that holds the model files.
pub const MODEL_DIR_ENV: &str = "ONEBRAIN_MODEL_DIR";

/// Files the setup script fetches, with their exact sizes (DESIGN.md) and which
/// `--models` argument fetches them.
const KNOWN_FILES: &[(&str, u64, &str)] = &[
    (TEST_MODEL_FILE, 98_362_432, "test"),
    (DEFAULT_MODEL_FILE, 1_117_320_768, "default"),
    (QUICK_MODEL_FILE, 491_400_064, "all"),
];

/// What was found for a configured model path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A single GGUF file (quantized weights + tokenizer metadata).
    Gguf(PathBuf),
    /// A Hugging Face directory: `config.json`, `*.safetensors`, `tokenizer.json`.
    HfDir(PathBuf),
}

impl ModelSource {
    /// The path on disk.
    pub fn path(&self) -> &Path {
        match self {
            ModelSource::Gguf(p) | ModelSource::HfDir(p) => p,
        }
    }
}

fn setup_arg(name: &str) -> &'static str {
    KNOWN_FILES.iter().find(|(n, _, _)| *n == name).map(|(_, _, s)| *s).unwrap_or("all")
}

/// Directories to search for a bare model file name, most specific first.
fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::var_os(MODEL_DIR_ENV) {
        dirs.push(PathBuf::from(dir));
    }
    let mut starts = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        starts.push(cwd);
    }
    // Where this crate was compiled: lets tests and benches run from any directory.
    starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    for start in starts {
        for dir in start.ancestors() {
            let candidate = dir.join(".cache").join("models");
            if !dirs.contains(&candidate) {
                dirs.push(candidate);
            }
        }
    }
    dirs
}

/// Resolves a configured model path to a file or HF directory and checks it.
pub fn resolve_model(path: &Path) -> Result<ModelSource> {
    let name = path.to_string_lossy().to_string();
    let mut searched = vec![path.to_path_buf()];
    let found = if path.exists() {
        Some(path.to_path_buf())
    } else if path.components().count() == 1 {
        let mut hit = None;
        for dir in search_dirs() {
            let candidate = dir.join(path);
            if candidate.exists() {
                hit = Some(candidate);
                break;
            }
            searched.push(candidate);
        }
        hit
    } else {
        None
    };
    let file_name =
        path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| name.clone());
    let Some(found) = found else {
        return Err(Error::ModelNotFound { name, searched, setup: setup_arg(&file_name) });
    };
    if found.is_dir() {
        if !found.join("config.json").is_file() {
            return Err(Error::WrongModelFile {
                path: found,
                reason: "a model directory needs config.json, *.safetensors and tokenizer.json"
                    .into(),
                setup: setup_arg(&file_name),
            });
        }
        return Ok(ModelSource::HfDir(found));
    }
    check_gguf(&found, &file_name)?;
    Ok(ModelSource::Gguf(found))
}

/// Size check for the files the setup fetches, magic check for any GGUF.
fn check_gguf(path: &Path, file_name: &str) -> Result<()> {
    let setup = setup_arg(file_name);
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if let Some((_, size, _)) = KNOWN_FILES.iter().find(|(n, _, _)| *n == file_name) {
        if meta.len() != *size {
            return Err(Error::WrongModelFile {
                path: path.to_path_buf(),
                reason: format!("size is {} bytes, expected {size}", meta.len()),
                setup,
            });
        }
    }
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    if file.read_exact(&mut magic).is_err() || &magic != b"GGUF" {
        return Err(Error::WrongModelFile {
            path: path.to_path_buf(),
            reason: "not a GGUF file (bad magic)".into(),
            setup,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_names_the_setup_command() {
        let err = resolve_model(Path::new("/nonexistent/dir/SmolLM2-135M-Instruct.Q4_1.gguf"))
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("scripts/setup.sh --models test"), "{msg}");
        let err = resolve_model(Path::new("no-such-model-anywhere.gguf")).unwrap_err();
        assert!(matches!(err, Error::ModelNotFound { .. }));
        assert!(err.to_string().contains("--models all"));
        // The default backbone is fetched by `--models default`, the 0.5B by `all`.
        let err = resolve_model(Path::new("/nonexistent/dir/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")).unwrap_err();
        assert!(err.to_string().contains("scripts/setup.sh --models default"), "{err}");
        let err = resolve_model(Path::new("/nonexistent/dir/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")).unwrap_err();
        assert!(err.to_string().contains("scripts/setup.sh --models all"), "{err}");
    }

    #[test]
    fn wrong_size_and_bad_magic_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join(TEST_MODEL_FILE);
        std::fs::write(&fake, b"GGUF too short").unwrap();
        let err = resolve_model(&fake).unwrap_err();
        assert!(matches!(err, Error::WrongModelFile { .. }), "{err}");
        assert!(err.to_string().contains("expected 98362432"));
        let other = dir.path().join("other.gguf");
        std::fs::write(&other, b"NOPE").unwrap();
        assert!(matches!(resolve_model(&other), Err(Error::WrongModelFile { .. })));
        std::fs::write(&other, b"GGUF....").unwrap();
        assert_eq!(resolve_model(&other).unwrap(), ModelSource::Gguf(other.clone()));
    }

    #[test]
    fn directory_needs_config_json() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(resolve_model(dir.path()), Err(Error::WrongModelFile { .. })));
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        assert_eq!(resolve_model(dir.path()).unwrap(), ModelSource::HfDir(dir.path().into()));
    }
}
