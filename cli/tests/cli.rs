//! The `seatq` command line's help. (Also makes `cargo test --workspace`
//! build the binary that the end-to-end CLI tests in `tests/cli.rs` run.)

use std::process::Command;

#[test]
fn lists_its_commands() {
    let out = Command::new(env!("CARGO_BIN_EXE_seatq")).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for command in ["migrate", "seed", "hold", "book", "confirm", "cancel", "enqueue", "status", "wait", "stats"] {
        assert!(help.contains(command), "{command} missing from --help");
    }
}

#[test]
fn refuses_a_malformed_request_before_connecting() {
    let out = Command::new(env!("CARGO_BIN_EXE_seatq"))
        .args(["--database-url", "postgres://nobody@127.0.0.1:1/none", "hold", "--event", "1", "--class", "2"])
        .args(["--party", "12", "--customer", "ann"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(format!("{stdout}{stderr}").contains("party_out_of_range"), "{stdout}{stderr}");
}

#[test]
fn refuses_a_prune_age_so_long_that_it_would_overflow() {
    // 2^64 / 3600 + 1 hours: in seconds it would wrap to a tiny age and prune
    // recent requests. Refused before connecting.
    let huge = (u64::MAX / 3600 + 1).to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_seatq"))
        .args(["--database-url", "postgres://nobody@127.0.0.1:1/none", "--retry-secs", "0"])
        .args(["prune", "--older-than-hours", &huge])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--older-than-hours") && stderr.contains("0..=1000000"), "{stderr}");
}
