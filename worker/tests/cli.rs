//! The `seatq-worker` command line. (Also makes `cargo test` build the
//! binary that the end-to-end fault tests start as real processes.)

use std::process::{Command, Output};

/// Run `seatq-worker` with these arguments.
fn worker(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seatq-worker")).args(args).output().unwrap()
}

/// What `seatq-worker --help` prints, which it must print without error.
fn help() -> String {
    let out = worker(&["--help"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn rejects_a_batch_size_out_of_range() {
    let out = worker(&["--batch-size", "1001"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--batch-size") && stderr.contains("1..=1000"), "{stderr}");
}

#[test]
fn documents_its_settings() {
    let help = help();
    for flag in
        ["--concurrency", "--batch-size", "--metrics-addr", "--retention-hours", "--shutdown-grace-secs", "--strategy"]
    {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
}

#[test]
fn refuses_a_retention_so_long_that_it_would_overflow() {
    // 2^64 / 3600 + 1 hours: in seconds it would wrap to a tiny age.
    let huge = (u64::MAX / 3600 + 1).to_string();
    for hours in [huge.as_str(), "1000001"] {
        // A bad URL, so that a worker that took the value would exit at once.
        let out = worker(&["--database-url", "not-a-url", "--retention-hours", hours]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--retention-hours") && stderr.contains("0..=1000000"), "{stderr}");
    }
}

#[test]
fn names_the_strategies_it_takes() {
    let out = worker(&["--strategy", "fast"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[possible values: skip-locked, blocking, nowait, serializable]"), "{stderr}");
    let help = help();
    for line in ["- skip-locked:", "- blocking:", "- nowait:", "- serializable:", "[default: skip-locked]"] {
        assert!(help.contains(line), "{line:?} missing from\n{help}");
    }
}

#[test]
fn prints_completions_and_its_manual_page() {
    let out = worker(&["completions", "bash"]);
    assert!(out.status.success(), "{out:?}");
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("seatq-worker") && script.contains("--batch-size"), "{script}");
    let out = worker(&["man"]);
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH seatq-worker 1") && page.contains("SEATQ_BATCH_SIZE"), "{page}");
}
