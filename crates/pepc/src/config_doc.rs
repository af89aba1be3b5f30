//! The configuration reference from one source: `crates/pepc/pepc.toml`, the whole
//! default configuration with every key's meaning beside it. `pepc config default`
//! prints it; docs/configuration.md is made from it ([`markdown`]); tests hold it equal
//! to the code's defaults and to the keys each section's struct takes.

/// The default configuration, commented (`pepc config default`).
pub const DEFAULT_TOML: &str = include_str!("../pepc.toml");

/// One key as the reference shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDoc {
    pub section: String,
    pub key: String,
    pub kind: &'static str,
    pub default: String,
    pub meaning: String,
}

/// What a line of the section holds, in order: a key, a note (a comment of its own),
/// or a commented-out example line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Key(KeyDoc),
    Note(String),
    Example(String),
}

/// A section: its name, what it is for, and its items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionDoc {
    pub name: String,
    pub about: String,
    pub items: Vec<Item>,
}

fn kind_of(value: &str) -> &'static str {
    match value.as_bytes().first() {
        Some(b'"') => "string",
        Some(b'[') => "array",
        Some(b't' | b'f') => "boolean",
        _ => "integer",
    }
}

/// Splits `key = value   # meaning` (the value may hold `#` inside a string).
fn key_line(line: &str) -> Option<(String, String, String)> {
    let (key, rest) = line.split_once('=')?;
    let key = key.trim();
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let rest = rest.trim();
    let mut in_str = false;
    let mut cut = rest.len();
    for (i, c) in rest.char_indices() {
        match c {
            '"' => in_str = !in_str,
            '#' if !in_str => {
                cut = i;
                break;
            }
            _ => {}
        }
    }
    let value = rest[..cut].trim().to_string();
    let meaning = rest[cut..].trim_start_matches('#').trim().to_string();
    Some((key.to_string(), value, meaning))
}

/// The reference, read from [`DEFAULT_TOML`].
pub fn sections() -> Vec<SectionDoc> {
    let mut out: Vec<SectionDoc> = Vec::new();
    let mut about = String::new();
    for line in DEFAULT_TOML.lines() {
        let t = line.trim_start();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            // The comment line just above a header is its section's intro.
            if let Some(prev) = out.last_mut() {
                if let Some(Item::Note(n)) = prev.items.last() {
                    about = n.clone();
                    prev.items.pop();
                }
            }
            out.push(SectionDoc {
                name: name.to_string(),
                about: std::mem::take(&mut about),
                items: Vec::new(),
            });
            continue;
        }
        let Some(sec) = out.last_mut() else {
            // Before the first section: the file's header, then the first one's intro.
            if let Some(c) = t.strip_prefix('#') {
                about = c.trim().to_string();
            }
            continue;
        };
        if t.is_empty() {
            continue;
        }
        if let Some(c) = t.strip_prefix('#') {
            let c = c.trim();
            let indented = line.starts_with(' ');
            match sec.items.last_mut() {
                // A continuation of the key above (aligned under its comment).
                Some(Item::Key(k)) if indented => {
                    k.meaning.push(' ');
                    k.meaning.push_str(c);
                }
                Some(Item::Note(n)) if indented => {
                    n.push(' ');
                    n.push_str(c);
                }
                _ => {
                    let example = c.starts_with("[[") || key_line(c).is_some();
                    sec.items.push(if example {
                        Item::Example(c.to_string())
                    } else {
                        Item::Note(c.to_string())
                    });
                }
            }
            continue;
        }
        if let Some((key, value, meaning)) = key_line(line) {
            sec.items.push(Item::Key(KeyDoc {
                section: sec.name.clone(),
                key,
                kind: kind_of(&value),
                default: value,
                meaning,
            }));
        }
    }
    out
}

/// The names of every key the reference documents in `section`, commented-out
/// example keys included.
pub fn documented_keys(section: &str) -> Vec<String> {
    let Some(s) = sections().into_iter().find(|s| s.name == section) else {
        return Vec::new();
    };
    s.items
        .iter()
        .filter_map(|i| match i {
            Item::Key(k) => Some(k.key.clone()),
            Item::Example(e) => key_line(e).map(|k| k.0),
            Item::Note(_) => None,
        })
        .collect()
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// docs/configuration.md.
pub fn markdown() -> String {
    let mut md = String::from(
        "# Configuration\n\n\
         <!-- Made by `pepc config docs` from crates/pepc/pepc.toml; a test fails when they differ. -->\n\n\
         Every key of every section, with its type, its default and what it means; where\n\
         only some values are allowed they are written `a | b | c`. No key is required:\n\
         `pepc run` without a file runs on these defaults, and `pepc config default` prints\n\
         them as a file `pepc run --config` takes unchanged. An error names the key and the\n\
         line of your file.\n",
    );
    for s in sections() {
        md.push_str(&format!("\n## [{}]\n\n", s.name));
        if !s.about.is_empty() {
            md.push_str(&format!("{}\n\n", s.about));
        }
        md.push_str("| key | type | default | meaning |\n|---|---|---|---|\n");
        let mut example = Vec::new();
        for i in &s.items {
            match i {
                Item::Key(k) => md.push_str(&format!(
                    "| `{}` | {} | `{}` | {} |\n",
                    k.key,
                    k.kind,
                    cell(&k.default),
                    cell(&k.meaning)
                )),
                Item::Note(n) => md.push_str(&format!("| | | | *{}* |\n", cell(n))),
                Item::Example(e) => example.push(e.clone()),
            }
        }
        if !example.is_empty() {
            md.push_str(&format!(
                "\nExample (no default):\n\n```toml\n{}\n```\n",
                example.join("\n")
            ));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lines_keep_hashes_inside_strings() {
        assert_eq!(
            key_line(r#"tun_name = "pepc%d"   # the device"#),
            Some(("tun_name".into(), "\"pepc%d\"".into(), "the device".into()))
        );
        assert_eq!(
            key_line(r##"x = "a#b" # c"##).map(|k| k.1),
            Some("\"a#b\"".into())
        );
        assert_eq!(key_line("# just a note"), None);
    }

    #[test]
    fn every_section_has_keys_and_an_intro() {
        let s = sections();
        assert!(s.len() >= 15, "{}", s.len());
        for sec in &s {
            assert!(!sec.about.is_empty(), "[{}] has no intro", sec.name);
            assert!(
                sec.items.iter().any(|i| matches!(i, Item::Key(_))),
                "[{}] has no key",
                sec.name
            );
        }
        for sec in &s {
            for i in &sec.items {
                if let Item::Key(k) = i {
                    assert!(!k.meaning.is_empty(), "{}.{} says nothing", sec.name, k.key);
                }
            }
        }
        let node = s.iter().find(|s| s.name == "node").unwrap();
        let Item::Key(k) = &node.items[0] else {
            panic!("{:?}", node.items[0]);
        };
        assert_eq!(
            (k.key.as_str(), k.kind, k.default.as_str()),
            ("slices", "integer", "1")
        );
    }
}
