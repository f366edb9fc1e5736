//! Loader errors are true and first: whatever the parallel chunking of a large JSON `List`, the
//! error names the first bad item in file order and says what is wrong with it, and a
//! syntactically valid file never gets a syntax error.

use std::io::Write;
use std::path::Path;

use kube_descheduler::snapshot::load::load_file;

fn error_of(path: &Path) -> String {
    match load_file(path) {
        Ok(s) => panic!("loaded {} nodes, {} pods", s.nodes.len(), s.pods.len()),
        Err(e) => e.to_string(),
    }
}

/// A List of `n` `{}` items as Python's `json.dump` writes it (`", "` between items).
fn write_empty_items(path: &Path, n: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(br#"{"apiVersion": "v1", "kind": "List", "items": ["#)
        .unwrap();
    for i in 0..n {
        f.write_all(if i == 0 { b"{}" } else { b", {}" }).unwrap();
    }
    f.write_all(br#"], "metadata": {"resourceVersion": ""}}"#)
        .unwrap();
    f.flush().unwrap();
}

fn assert_names_item_zero_without_syntax_claims(e: &str) {
    assert!(e.contains("items[0]"), "{e}");
    assert!(
        !e.contains("invalid JSON") && !e.contains("ends in the middle"),
        "a valid file got a syntax error: {e}"
    );
    assert!(e.contains("kind"), "says what is wrong (no kind): {e}");
}

#[test]
fn two_million_empty_items_written_by_json_dump_name_the_first_item_not_a_syntax_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty-items.json");
    write_empty_items(&path, 2_000_000);
    assert_names_item_zero_without_syntax_claims(&error_of(&path));
}

#[test]
fn one_million_empty_items_always_name_items_0() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty-items.json");
    write_empty_items(&path, 1_000_000);
    for _ in 0..5 {
        assert_names_item_zero_without_syntax_claims(&error_of(&path));
    }
}

/// A List of `n` nodes (several 2 MiB blocks) with the given items replaced by bad pods.
fn write_nodes_with_bad_items(path: &Path, n: usize, bad: &[usize]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(br#"{"apiVersion":"v1","kind":"List","items":["#)
        .unwrap();
    for i in 0..n {
        if i > 0 {
            f.write_all(b",\n").unwrap();
        }
        if bad.contains(&i) {
            write!(
                f,
                r#"{{"kind":"Pod","metadata":{{"name":"bad-{i}","namespace":"x"}},"spec":{{"priority":"high"}}}}"#
            )
            .unwrap();
        } else {
            write!(
                f,
                r#"{{"kind":"Node","apiVersion":"v1","metadata":{{"name":"node-{i:07}","labels":{{"kubernetes.io/hostname":"node-{i:07}"}}}},"status":{{"allocatable":{{"cpu":"4","memory":"16Gi","pods":"110"}}}}}}"#
            )
            .unwrap();
        }
    }
    f.write_all(b"]}").unwrap();
    f.flush().unwrap();
}

#[test]
fn a_bad_item_in_the_last_block_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("last.json");
    let n = 60_000;
    write_nodes_with_bad_items(&path, n, &[n - 1]);
    assert!(
        std::fs::metadata(&path).unwrap().len() > 3 * (2 << 20),
        "several blocks"
    );
    let e = error_of(&path);
    assert!(
        e.contains(&format!("items[{}]", n - 1)) && e.contains("Pod x/bad-59999"),
        "{e}"
    );
    assert!(e.contains("spec.priority"), "says what is wrong: {e}");
}

#[test]
fn bad_items_in_two_blocks_always_name_the_earlier() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.json");
    let n = 60_000;
    // ~170 bytes an item: items 20,000 and 50,000 sit in different 2 MiB blocks.
    write_nodes_with_bad_items(&path, n, &[20_000, 50_000]);
    for _ in 0..5 {
        let e = error_of(&path);
        assert!(e.contains("items[20000]") && e.contains("bad-20000"), "{e}");
    }
}
