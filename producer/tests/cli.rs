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
