//! No tensor is hard-wired to the CPU: outside `host/model/src/device.rs`, where a config's
//! `device` is opened, no library code of the workspace names `Device::Cpu`. Every tensor
//! is created on the device of the weights or values it meets, so a CUDA model runs its
//! whole forward, loss and optimizer step on the GPU. Tests and doc examples may name the
//! CPU (they run here).

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn only_the_device_module_names_the_cpu() {
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(&host).unwrap().flatten() {
        let src = krate.path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "the workspace's library sources: {}", files.len());
    let chosen = host.join("model/src/device.rs");
    let mut hard_wired = Vec::new();
    for f in files.iter().filter(|f| **f != chosen) {
        let text = std::fs::read_to_string(f).unwrap();
        // Unit tests sit at the end of a file, after `#[cfg(test)]`.
        let library = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, line) in library.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("Device::Cpu") {
                hard_wired.push(format!("{}:{}: {}", f.strip_prefix(&host).unwrap().display(), i + 1, line.trim()));
            }
        }
    }
    assert!(hard_wired.is_empty(), "tensors hard-wired to the CPU:\n{}", hard_wired.join("\n"));
    // The check reads what it should: the device module does name it.
    assert!(std::fs::read_to_string(&chosen).unwrap().contains("Device::Cpu"));
}
