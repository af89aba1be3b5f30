//! `pepc --version` names the commit it was built from (`git describe`), or
//! "unknown commit" outside a git checkout (a source tarball, a package build).

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown commit".into());
    println!("cargo:rustc-env=PEPC_COMMIT={commit}");
    // A new commit (or a checkout) changes the version line.
    let mut watch = vec![
        "../../.git/HEAD".to_string(),
        "../../.git/index".to_string(),
    ];
    if let Ok(head) = std::fs::read_to_string("../../.git/HEAD") {
        if let Some(r) = head.trim().strip_prefix("ref: ") {
            watch.push(format!("../../.git/{r}"));
            watch.push("../../.git/packed-refs".into());
        }
    }
    for f in watch {
        if std::path::Path::new(&f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    }
}
