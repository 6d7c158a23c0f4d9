//! The `seatq-worker` command line. (Also makes `cargo test` build the
//! binary that the end-to-end fault tests start as real processes.)

use std::process::Command;

#[test]
fn rejects_a_batch_size_out_of_range() {
    let out = Command::new(env!("CARGO_BIN_EXE_seatq-worker")).args(["--batch-size", "1001"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--batch-size") && stderr.contains("1..=1000"), "{stderr}");
}

#[test]
fn documents_its_settings() {
    let out = Command::new(env!("CARGO_BIN_EXE_seatq-worker")).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in
        ["--concurrency", "--batch-size", "--metrics-addr", "--retention-hours", "--shutdown-grace-secs", "--strategy"]
    {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
}
