//! The results committed under `docs/benchmarks/` stay light and readable (issue 10): raw
//! reports, whose per-call series are most of the bytes, are kept gzip-compressed; every kept
//! report still reads with the tools that re-plot and tabulate it; and the Markdown there links
//! only to files that exist (compressing a report renames it).
//!
//! These run in `cargo test` (and so in `scripts/test`), where a new result directory is
//! checked before it is committed.

use eagernfs_bench::report::{load_write_report, read_report_text, WRITE_SCHEMA};
use std::path::{Path, PathBuf};

/// An uncompressed report larger than this must be compressed. The per-call reports of a
/// 256 MiB write run are ~480 KiB (~85 KiB compressed); summaries without series stay far
/// below, so they can stay plain and readable in a browser.
const UNCOMPRESSED_JSON_MAX_BYTES: u64 = 256 * 1024;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file under `dir`, recursively, sorted so failures list in a stable order.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn benchmark_files() -> Vec<PathBuf> {
    let files = files_under(&repo_root().join("docs/benchmarks"));
    assert!(files.iter().any(|f| f.ends_with("README.md")), "docs/benchmarks/ not found");
    files
}

/// The path as a reader of the repository names it: `docs/benchmarks/...`.
fn shown(path: &Path) -> String {
    let root = repo_root().canonicalize().unwrap();
    let path = path.canonicalize().unwrap();
    path.strip_prefix(&root).unwrap_or(&path).display().to_string()
}

fn is_report(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".json") || name.ends_with(".json.gz")
}

#[test]
fn no_uncompressed_json_under_docs_benchmarks_is_over_256_kib() {
    let heavy: Vec<String> = benchmark_files()
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "json"))
        .filter_map(|f| {
            let bytes = f.metadata().unwrap().len();
            (bytes > UNCOMPRESSED_JSON_MAX_BYTES).then(|| {
                let f = shown(f);
                format!(
                    "{f} ({} KiB): run `gzip -9 -n {f}` from the repository root and link {f}.gz instead",
                    bytes / 1024
                )
            })
        })
        .collect();
    assert!(
        heavy.is_empty(),
        "uncompressed JSON over {} KiB under docs/benchmarks/ makes every clone heavier for good \
         (save reports as --json FILE.json.gz; bench plot and bench table read them as they are):\n  {}",
        UNCOMPRESSED_JSON_MAX_BYTES / 1024,
        heavy.join("\n  ")
    );
}

#[test]
fn every_kept_report_reads_back_and_write_reports_load_for_replotting() {
    let mut write_reports = 0;
    for file in benchmark_files().iter().filter(|f| is_report(f)) {
        let text = read_report_text(file).unwrap_or_else(|e| panic!("{}: {e}", shown(file)));
        let value: serde_json::Value =
            serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", shown(file)));
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("(none)");
        assert!(schema.starts_with("eagernfs-bench/"), "{}: schema {schema:?}", shown(file));
        if schema == WRITE_SCHEMA {
            load_write_report(file).unwrap_or_else(|e| panic!("{}: {e}", shown(file)));
            write_reports += 1;
        }
    }
    assert!(write_reports > 0, "no bench write report found under docs/benchmarks/");
}

/// The relative link targets of a Markdown text: `[text](target)`, without URLs and anchors.
fn relative_links(markdown: &str) -> Vec<&str> {
    markdown
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split([')', ' ']).next())
        .filter(|t| !t.is_empty() && !t.starts_with('#') && !t.contains("://") && !t.starts_with("mailto:"))
        .map(|t| t.split('#').next().unwrap_or(t))
        .collect()
}

#[test]
fn markdown_under_docs_benchmarks_links_only_to_files_that_exist() {
    let mut broken = Vec::new();
    for md in benchmark_files().iter().filter(|f| f.extension().is_some_and(|e| e == "md")) {
        let text = std::fs::read_to_string(md).unwrap();
        for target in relative_links(&text) {
            if !md.parent().unwrap().join(target).exists() {
                broken.push(format!("{} links to {target}", shown(md)));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken links (a compressed report is NAME.json.gz):\n  {}",
        broken.join("\n  ")
    );
}
