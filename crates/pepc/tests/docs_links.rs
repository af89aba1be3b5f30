//! The repository's words point at things that exist: every relative link in
//! README.md and docs/, and every `crates/...`, `scripts/...`, `docs/...` or `fuzz/...`
//! path named there or in a source comment, exists; no comment cites an issue number
//! or a roadmap, which live outside the repository.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file under `dir` ending in `ext`, skipping build output and vendored trees.
fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if p.is_dir() {
            if !matches!(
                name.as_str(),
                "target" | "node_modules" | ".git" | "corpus" | "artifacts"
            ) {
                files(&p, ext, out);
            }
        } else if name.ends_with(ext) {
            out.push(p);
        }
    }
}

/// The repository paths a text names: `crates/x/y.rs`, `scripts/z.sh`, ...
fn named_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for start in ["crates/", "scripts/", "docs/", "fuzz/"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            // A path starts the token: not `../crates/` of a link (checked as a link)
            // nor part of a longer word.
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| {
                c.is_alphanumeric() || c == '/' || c == '.' || c == '_' || c == '-'
            }) {
                continue;
            }
            let raw: String = text[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'))
                .collect();
            let tok = raw.trim_end_matches(['.', '/', '-']);
            // Patterns and placeholders name no one file.
            if text[at + raw.len()..].starts_with(['*', '{', '<'])
                || tok.contains("..")
                || tok == start.trim_end_matches('/')
            {
                continue;
            }
            out.push(tok.to_string());
        }
    }
    out
}

/// Markdown links `[..](target)` that are relative paths.
fn relative_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("](") {
        let at = from + i + 2;
        from = at;
        let Some(end) = text[at..].find(')') else {
            break;
        };
        let t = text[at..at + end].split('#').next().unwrap_or("").trim();
        if t.is_empty() || t.contains("://") || t.starts_with("mailto:") || t.contains(' ') {
            continue;
        }
        out.push(t.to_string());
    }
    out
}

/// The comment part of each line of a Rust file (after `//`), outside string literals
/// as far as a line-wise look can tell.
fn comments(src: &str) -> Vec<(usize, &str)> {
    src.lines()
        .enumerate()
        .filter_map(|(n, l)| {
            let t = l.trim_start();
            t.starts_with("//")
                .then(|| (n + 1, t.trim_start_matches('/').trim_start_matches('!')))
        })
        .collect()
}

/// "issue 12", "Issue #3", "ROADMAP", "roadmap".
fn cites_outside(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    if lower.contains("roadmap") {
        return Some("a roadmap".into());
    }
    let mut from = 0;
    while let Some(i) = lower[from..].find("issue") {
        let at = from + i;
        from = at + 5;
        let rest = lower[at + 5..].trim_start_matches([' ', '#']);
        if rest.starts_with(|c: char| c.is_ascii_digit()) && lower[at + 5..].starts_with([' ', '#'])
        {
            let n: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            return Some(format!("issue {n}"));
        }
    }
    None
}

#[test]
fn every_named_path_and_link_exists_and_no_comment_cites_the_tracker() {
    let root = root();
    let mut bad = Vec::new();
    let mut docs = vec![root.join("README.md")];
    files(&root.join("docs"), ".md", &mut docs);
    for d in &docs {
        let text = std::fs::read_to_string(d).unwrap();
        let rel = d.strip_prefix(&root).unwrap_or(d).display().to_string();
        for l in relative_links(&text) {
            let target = d.parent().unwrap().join(&l);
            if !target.exists() {
                bad.push(format!("{rel}: link to {l}: no such file"));
            }
        }
        for p in named_paths(&text) {
            if !root.join(&p).exists() {
                bad.push(format!("{rel}: names {p}: no such path"));
            }
        }
        if let Some(c) = cites_outside(&text) {
            bad.push(format!("{rel}: cites {c}, which is not in the repository"));
        }
    }
    let mut sources = Vec::new();
    for dir in ["crates", "fuzz"] {
        files(&root.join(dir), ".rs", &mut sources);
    }
    assert!(sources.len() > 100, "found only {} sources", sources.len());
    for f in &sources {
        // This file states the rules, with examples of what they refuse.
        if f.ends_with("pepc/tests/docs_links.rs") {
            continue;
        }
        let src = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        for (n, c) in comments(&src) {
            for p in named_paths(c) {
                if !root.join(&p).exists() {
                    bad.push(format!("{rel}:{n}: names {p}: no such path"));
                }
            }
            if let Some(what) = cites_outside(c) {
                bad.push(format!(
                    "{rel}:{n}: cites {what}, which is not in the repository"
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} problems:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn the_checker_sees_what_it_must() {
    assert_eq!(
        named_paths("see crates/mme/src/gate.rs."),
        ["crates/mme/src/gate.rs"]
    );
    assert_eq!(named_paths("`crates/slice/src/*.rs`"), Vec::<String>::new());
    assert_eq!(named_paths("x/crates/a"), Vec::<String>::new());
    assert_eq!(
        relative_links("[a](docs/x.md#y) [b](https://e.org)"),
        ["docs/x.md"]
    );
    assert_eq!(cites_outside("as issue 13 asked"), Some("issue 13".into()));
    assert_eq!(cites_outside("the ROADMAP says"), Some("a roadmap".into()));
    assert_eq!(cites_outside("an issue with 3 UEs"), None);
    assert_eq!(cites_outside("issues"), None);
}

/// Every crate either forbids unsafe code or denies it and marks each use (the
/// workspace's rule), and takes the workspace's lints.
#[test]
fn every_crate_says_where_it_stands_on_unsafe_and_takes_the_workspace_lints() {
    let root = root();
    let mut bad = Vec::new();
    for e in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let dir = e.path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = e.file_name().to_string_lossy().to_string();
        if !manifest.contains("[lints]") {
            bad.push(format!("{name}: no [lints] workspace = true"));
        }
        for root_file in ["src/lib.rs", "src/main.rs"] {
            let Ok(src) = std::fs::read_to_string(dir.join(root_file)) else {
                continue;
            };
            if !src.contains("#![forbid(unsafe_code)]") && !src.contains("#![deny(unsafe_code)]") {
                bad.push(format!(
                    "{name}/{root_file}: neither forbids nor denies unsafe code"
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// docs/architecture.md draws a node with the plan the code makes for the
/// configuration shown beside it (`PEPC_BLESS_DOCS=1` rewrites the figure).
#[test]
fn the_architecture_figure_is_the_codes_plan() {
    let path = root().join("docs/architecture.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let cfg_at = doc
        .find("# plan-config\n")
        .expect("the plan's configuration");
    let cfg_end = cfg_at + doc[cfg_at..].find("```").expect("its end");
    let cfg = pepc::epc::EpcConfig::parse(&doc[cfg_at..cfg_end]).expect("it parses");
    let plan = pepc::epc::plan_of(&cfg, 8).to_string();
    let marker = doc.find("<!-- plan:").expect("the figure's marker");
    let open = marker + doc[marker..].find("```text\n").expect("the figure") + "```text\n".len();
    let close = open + doc[open..].find("```").expect("the figure's end");
    if std::env::var_os("PEPC_BLESS_DOCS").is_some() {
        let new = format!("{}{}{}", &doc[..open], plan, &doc[close..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    assert_eq!(
        doc[open..close],
        plan,
        "docs/architecture.md's figure is not the plan (PEPC_BLESS_DOCS=1 rewrites it)"
    );
}

/// docs/configuration.md is what the code makes of crates/pepc/pepc.toml
/// (`PEPC_BLESS_DOCS=1` rewrites it).
#[test]
fn the_configuration_reference_is_generated() {
    let path = root().join("docs/configuration.md");
    let want = pepc::config_doc::markdown();
    if std::env::var_os("PEPC_BLESS_DOCS").is_some() {
        std::fs::write(&path, format!("{}\n", want.trim_end())).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have.trim_end() == want.trim_end(),
        "docs/configuration.md differs from `pepc config docs` (PEPC_BLESS_DOCS=1 rewrites it)"
    );
}
