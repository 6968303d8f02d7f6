//! `examples/cswitch.toml` shows every key `docs/config.md` documents: a key added to the
//! docs but not to the example fails here. (`cswitch check` on the example, in the cswitch
//! crate's tests, keeps the example valid.)
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::Path;

fn workspace_file(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The keys in the first column of every `| Key | Type | Default | Meaning |` table, with
/// the section heading above them.
fn documented_keys(doc: &str) -> Vec<(String, String)> {
    let mut keys = Vec::new();
    let (mut heading, mut in_key_table) = (String::new(), false);
    for line in doc.lines() {
        if line.starts_with('#') {
            heading = line.trim_start_matches('#').trim().to_string();
        }
        if line.starts_with("| Key |") {
            in_key_table = true;
            continue;
        }
        if !line.starts_with('|') {
            in_key_table = false;
            continue;
        }
        if !in_key_table || line.starts_with("|---") {
            continue;
        }
        let first = line.split('|').nth(1).unwrap_or("");
        for key in first.split(',').filter_map(|k| k.trim().strip_prefix('`')?.strip_suffix('`')) {
            keys.push((heading.clone(), key.to_string()));
        }
    }
    keys
}

/// Whether `key = ` is written in the example, live or in a commented alternative.
fn shown(example: &str, key: &str) -> bool {
    example.match_indices(key).any(|(at, _)| {
        let before = example[..at].chars().next_back();
        let after = example[at + key.len()..].trim_start_matches(' ');
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_') && after.starts_with('=')
    })
}

#[test]
fn the_example_shows_every_documented_key() {
    let (doc, example) = (workspace_file("docs/config.md"), workspace_file("examples/cswitch.toml"));
    let keys = documented_keys(&doc);
    assert!(keys.len() > 80, "the docs' key tables were not found ({} keys)", keys.len());
    let missing: Vec<String> =
        keys.iter().filter(|(_, k)| !shown(&example, k)).map(|(h, k)| format!("{k} ({h})")).collect();
    assert!(missing.is_empty(), "examples/cswitch.toml lacks documented keys: {}", missing.join(", "));
}

#[test]
fn the_example_names_every_scheduler() {
    let example = workspace_file("examples/cswitch.toml");
    for kind in balance::SchedulerKind::ALL.iter() {
        let name = kind.name();
        assert!(
            example.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == name),
            "examples/cswitch.toml does not name scheduler `{name}`"
        );
    }
}

#[test]
fn a_key_missing_from_the_example_is_found() {
    let doc = "## `[x]`\n\n| Key | Type | Default | Meaning |\n|---|---|---|---|\n| `alpha`, `beta` | int | 1 | m |\n";
    let keys = documented_keys(doc);
    assert_eq!(
        keys,
        vec![("`[x]`".to_string(), "alpha".to_string()), ("`[x]`".to_string(), "beta".to_string())]
    );
    assert!(shown("alpha = 1\n# beta = 2\n", "beta"));
    assert!(!shown("alphabeta = 1\n", "beta"), "a longer key is not the key");
    assert!(!shown("beta is mentioned\n", "beta"), "a mention is not a key");
}

/// Docs and bench scripts name paths relative to the repository, never a development
/// machine's (`/work/…`, `/home/…`).
#[test]
fn docs_name_no_development_machine_paths() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", "bench", "examples"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if ["md", "sh", "py", "toml", "tmpl"].contains(&ext) {
                files.push(path);
            }
        }
    }
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for bad in ["/work/", "/home/", "/root/"] {
            assert!(!text.contains(bad), "{} names a machine path ({bad}…)", f.display());
        }
    }
}
