//! Where in the operator's file a configuration error is: its line and its key. Every
//! section is read from the file's own text in one pass (one struct, so the unknown-
//! section hint lists them all), and every error, whether toml's (unknown key, wrong
//! type) or a key's validation, is placed by looking the key up in a spanned parse of
//! the same text.

use crate::error::ConfigError;
use std::ops::Range;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// The file parsed with spans, for looking keys up.
pub(crate) struct Spans<'t> {
    text: &'t str,
    root: Option<Spanned<DeTable<'t>>>,
}

impl<'t> Spans<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        Spans {
            text,
            // Not TOML at all: toml's own error (with its span) says where.
            root: DeTable::parse(text).ok(),
        }
    }

    /// The 1-based line of byte `pos`.
    fn line_of(&self, pos: usize) -> usize {
        let pos = pos.min(self.text.len());
        self.text.as_bytes()[..pos]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// The line of dotted `key` ("node.slices") in the file; None when the file does
    /// not set it (the error is about its default, or about another key's value).
    pub(crate) fn line_of_key(&self, key: &str) -> Option<usize> {
        let mut table = self.root.as_ref()?.get_ref();
        let mut parts = key.split('.').peekable();
        while let Some(p) = parts.next() {
            let (k, v) = table.iter().find(|(k, _)| k.get_ref() == p)?;
            if parts.peek().is_none() {
                return Some(self.line_of(k.span().start));
            }
            table = match v.get_ref() {
                DeValue::Table(t) => t,
                // [[pcrf.rule]]: the first entry that has the rest of the key.
                DeValue::Array(a) => {
                    let rest: String = parts.collect::<Vec<_>>().join(".");
                    return a
                        .iter()
                        .filter_map(|e| match e.get_ref() {
                            DeValue::Table(t) => Some(t),
                            _ => None,
                        })
                        .find_map(|t| key_line(self, t, &rest))
                        .or(Some(self.line_of(k.span().start)));
                }
                _ => return Some(self.line_of(k.span().start)),
            };
        }
        None
    }

    /// The dotted key whose name or value holds byte range `span` (the innermost).
    fn key_at(&self, span: &Range<usize>) -> Option<String> {
        fn walk(t: &DeTable<'_>, span: &Range<usize>, path: &mut Vec<String>) -> bool {
            for (k, v) in t.iter() {
                let inside =
                    |r: Range<usize>| r.start <= span.start && span.start < r.end.max(r.start + 1);
                let hit = inside(k.span()) || inside(v.span());
                let nested = match v.get_ref() {
                    DeValue::Table(inner) => {
                        path.push(k.get_ref().to_string());
                        if walk(inner, span, path) {
                            return true;
                        }
                        path.pop();
                        false
                    }
                    DeValue::Array(a) => {
                        path.push(k.get_ref().to_string());
                        for e in a.iter() {
                            if let DeValue::Table(inner) = e.get_ref() {
                                if walk(inner, span, path) {
                                    return true;
                                }
                            }
                        }
                        path.pop();
                        false
                    }
                    _ => false,
                };
                if nested {
                    return true;
                }
                if hit {
                    path.push(k.get_ref().to_string());
                    return true;
                }
            }
            false
        }
        let mut path = vec![];
        walk(self.root.as_ref()?.get_ref(), span, &mut path).then(|| path.join("."))
    }

    /// toml's error, with its line and the key it is about.
    pub(crate) fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let span = e.span();
        ConfigError::Syntax {
            line: span.as_ref().map(|s| self.line_of(s.start)),
            key: span.as_ref().and_then(|s| self.key_at(s)),
            message: e.message().trim().to_string(),
        }
    }

    /// `e`, placed at the line of the key it names (when the file sets that key).
    pub(crate) fn place(&self, e: ConfigError) -> ConfigError {
        match e.key().and_then(|k| self.line_of_key(&k)) {
            Some(line) => ConfigError::At {
                line,
                source: Box::new(e),
            },
            None => e,
        }
    }
}

fn key_line(s: &Spans<'_>, t: &DeTable<'_>, key: &str) -> Option<usize> {
    let (k, _) = t.iter().find(|(k, _)| k.get_ref() == key)?;
    Some(s.line_of(k.span().start))
}
