//! Host bindings, one module per released WIT version (Zed's
//! `wasm_host/wit/since_v0_8_0.rs`). The rest of the host sees [`latest`]
//! and the plain `onebrain-core` types; an older module keeps only the
//! worlds that changed after it, and converts into the core types.

pub(crate) mod since_v0_1_0;
pub(crate) mod since_v0_2_0;
pub(crate) mod since_v0_3_0;
pub(crate) mod since_v0_4_0;

pub(crate) use since_v0_4_0 as latest;

/// A WIT version this host has bindings for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiVersion {
    /// `onebrain:plugin@0.1.0`, the folder `wit/since_v0.1.0`: a reward sees eight numbers.
    V0_1_0,
    /// `onebrain:plugin@0.2.0`, the folder `wit/since_v0.2.0`: a reward sees the whole episode.
    V0_2_0,
    /// `onebrain:plugin@0.3.0`, the folder `wit/since_v0.3.0`: a checker can say `undecided`.
    V0_3_0,
    /// `onebrain:plugin@0.4.0`, the folder `wit/since_v0.4.0`: a diagnostic parser can
    /// `review` a spec against the task's text.
    V0_4_0,
}

impl ApiVersion {
    /// Every supported version, oldest first.
    pub const SUPPORTED: [ApiVersion; 4] =
        [ApiVersion::V0_1_0, ApiVersion::V0_2_0, ApiVersion::V0_3_0, ApiVersion::V0_4_0];

    /// The newest version, the one the SDK writes.
    pub const LATEST: ApiVersion = ApiVersion::V0_4_0;

    /// The semantic version string.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V0_1_0 => "0.1.0",
            ApiVersion::V0_2_0 => "0.2.0",
            ApiVersion::V0_3_0 => "0.3.0",
            ApiVersion::V0_4_0 => "0.4.0",
        }
    }

    /// The version for an `onebrain:api-version` section's text. Patch
    /// releases only add documentation, so `0.1.x` loads as `0.1.0`.
    pub fn from_section(text: &str) -> Option<ApiVersion> {
        let mut parts = text.trim().split('.');
        let (major, minor, patch) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || patch.parse::<u32>().is_err() {
            return None;
        }
        match (major, minor) {
            ("0", "1") => Some(ApiVersion::V0_1_0),
            ("0", "2") => Some(ApiVersion::V0_2_0),
            ("0", "3") => Some(ApiVersion::V0_3_0),
            ("0", "4") => Some(ApiVersion::V0_4_0),
            _ => None,
        }
    }

    /// "0.1.0, 0.2.0, 0.3.0, 0.4.0", for error messages.
    pub fn supported_list() -> String {
        Self::SUPPORTED.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// The name of the custom section the SDK writes.
pub(crate) const API_VERSION_SECTION: &str = "onebrain:api-version";

/// Reads the `onebrain:api-version` custom section out of a component
/// (it sits in the core module nested inside) without compiling anything.
pub(crate) fn read_api_version(bytes: &[u8]) -> Result<Option<String>, String> {
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| e.to_string())? {
            wasmparser::Payload::CustomSection(c) if c.name() == API_VERSION_SECTION => {
                return Ok(Some(String::from_utf8_lossy(c.data()).into_owned()));
            }
            _ => {}
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_by_major_and_minor() {
        assert_eq!(ApiVersion::from_section("0.1.0"), Some(ApiVersion::V0_1_0));
        assert_eq!(ApiVersion::from_section("0.1.7"), Some(ApiVersion::V0_1_0));
        assert_eq!(ApiVersion::from_section("0.2.0"), Some(ApiVersion::V0_2_0));
        assert_eq!(ApiVersion::from_section("0.3.0"), Some(ApiVersion::V0_3_0));
        assert_eq!(ApiVersion::from_section("0.4.0"), Some(ApiVersion::V0_4_0));
        assert_eq!(ApiVersion::from_section("0.5.0"), None);
        assert_eq!(ApiVersion::from_section("1.1.0"), None);
        assert_eq!(ApiVersion::from_section("0.1"), None);
        assert_eq!(ApiVersion::from_section("0.1.x"), None);
    }

    /// The premise of serving 0.1.0's domain adapters, diagnostic parsers and checkers
    /// with 0.2.0's bindings: those worlds, and every record they use, are the same text.
    #[test]
    fn only_the_reward_world_changed_in_0_2_0() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit");
        let read = |v: &str, f: &str| {
            let text = std::fs::read_to_string(format!("{dir}/since_v{v}/{f}")).unwrap();
            text.lines().filter(|l| !l.starts_with("package ")).collect::<Vec<_>>().join("\n")
        };
        for world in ["domain-adapter.wit", "diagnostic-parser.wit", "faithfulness-checker.wit"] {
            assert_eq!(read("0.1.0", world), read("0.2.0", world), "{world} changed");
        }
        assert_ne!(read("0.1.0", "reward.wit"), read("0.2.0", "reward.wit"));
        // Every type 0.1.0 declared, other than the reward's, is still there unchanged.
        let (old, new) = (read("0.1.0", "types.wit"), read("0.2.0", "types.wit"));
        let types = [
            "record spec", "record task", "enum category", "enum severity", "enum spec-file",
            "record diagnostic", "record solver-output", "enum drift", "enum decision",
            "record faithfulness-report",
        ];
        for name in types {
            let block = |t: &str| {
                let start = t.find(&format!("{name} {{")).unwrap_or_else(|| panic!("{name}"));
                t[start..start + t[start..].find('}').unwrap()].to_string()
            };
            assert_eq!(block(&old), block(&new), "{name} changed");
        }
    }

    /// The premise of serving 0.2.0's rewards, domain adapters and diagnostic parsers with
    /// 0.3.0's bindings: only the checker's report changed, by three fields at its end.
    #[test]
    fn only_the_checker_report_changed_in_0_3_0() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit");
        let read = |v: &str, f: &str| {
            let text = std::fs::read_to_string(format!("{dir}/since_v{v}/{f}")).unwrap();
            text.lines().filter(|l| !l.starts_with("package ")).collect::<Vec<_>>().join("\n")
        };
        for world in ["reward.wit", "domain-adapter.wit", "diagnostic-parser.wit", "faithfulness-checker.wit"] {
            assert_eq!(read("0.2.0", world), read("0.3.0", world), "{world} changed");
        }
        let (old, new) = (read("0.2.0", "types.wit"), read("0.3.0", "types.wit"));
        let body = |t: &str| t[t.find("interface types").unwrap()..].to_string();
        let report = |t: &str| {
            let start = t.find("record faithfulness-report {").unwrap();
            t[start..start + t[start..].find("\n    }").unwrap()].to_string()
        };
        let (old_r, new_r) = (report(&old), report(&new));
        assert!(new_r.starts_with(&old_r), "0.2.0's fields must come first, unchanged");
        for field in ["undecided: bool,", "init-preserved: bool,", "work: u64,"] {
            assert!(new_r[old_r.len()..].contains(field), "{field}");
        }
        assert_eq!(body(&old).replace(&old_r, ""), body(&new).replace(&new_r, ""), "only the report changed");
    }

    /// The premise of serving 0.3.0's rewards, domain adapters and checkers with 0.4.0's
    /// bindings: only the diagnostic-parser world changed, by one export after `parse`,
    /// which is 0.3.0's unchanged; no record changed.
    #[test]
    fn only_the_diagnostic_parser_gained_review_in_0_4_0() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit");
        let read = |v: &str, f: &str| {
            let text = std::fs::read_to_string(format!("{dir}/since_v{v}/{f}")).unwrap();
            text.lines().filter(|l| !l.starts_with("package ")).collect::<Vec<_>>().join("\n")
        };
        for world in ["reward.wit", "domain-adapter.wit", "faithfulness-checker.wit"] {
            assert_eq!(read("0.3.0", world), read("0.4.0", world), "{world} changed");
        }
        let body = |t: &str| t[t.find("interface types").unwrap()..].to_string();
        assert_eq!(body(&read("0.3.0", "types.wit")), body(&read("0.4.0", "types.wit")), "a record changed");
        // Code lines only: the comments around `parse` say more in 0.4.0, its signature does not.
        let code = |t: &str| {
            t.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//")).map(String::from).collect::<Vec<_>>()
        };
        let (old, new) = (code(&read("0.3.0", "diagnostic-parser.wit")), code(&read("0.4.0", "diagnostic-parser.wit")));
        let parse = |c: &[String]| c.iter().find(|l| l.starts_with("export parse:")).cloned().unwrap();
        assert_eq!(parse(&old), parse(&new));
        let exports = |c: &[String]| c.iter().filter(|l| l.starts_with("export ")).count();
        assert_eq!((exports(&old), exports(&new)), (1, 2));
        assert!(new.iter().any(|l| l.starts_with(
            "export review: func(task-text: string, candidate: spec, found: list<diagnostic>) -> result<list<diagnostic>, string>;"
        )));
    }

    #[test]
    fn custom_section_is_found_in_a_module() {
        // A core module with only a custom section: \0asm, version 1, section id 0.
        let name = API_VERSION_SECTION.as_bytes();
        let data = b"0.1.0";
        let mut m = b"\0asm\x01\0\0\0\0".to_vec();
        m.push((1 + name.len() + data.len()) as u8);
        m.push(name.len() as u8);
        m.extend_from_slice(name);
        m.extend_from_slice(data);
        assert_eq!(read_api_version(&m).unwrap().as_deref(), Some("0.1.0"));
        assert_eq!(read_api_version(b"\0asm\x01\0\0\0").unwrap(), None);
        assert!(read_api_version(b"not wasm").is_err());
    }
}
