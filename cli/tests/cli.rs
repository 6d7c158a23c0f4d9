//! The `seatq` command line's help. (Also makes `cargo test --workspace`
//! build the binary that the end-to-end CLI tests in `tests/cli.rs` run.)

use std::process::Command;

/// Run `seatq` with these arguments (and no database anywhere).
fn seatq(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_seatq"))
        .env_remove("DATABASE_URL")
        .args(["--database-url", "postgres://nobody@127.0.0.1:1/none", "--retry-secs", "0"])
        .args(args)
        .output()
        .unwrap()
}

/// What `seatq <args> --help` prints, which it must print without error.
fn help(args: &[&str]) -> String {
    let out = seatq(&[args, &["--help"]].concat());
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn lists_its_commands() {
    let help = help(&[]);
    for command in
        ["migrate", "seed", "hold", "book", "confirm", "cancel", "extend", "enqueue", "status", "wait", "stats"]
    {
        assert!(help.contains(command), "{command} missing from --help");
    }
}

#[test]
fn refuses_a_malformed_request_before_connecting() {
    let out = seatq(&["hold", "--event", "1", "--class", "2", "--party", "12", "--customer", "ann"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(format!("{stdout}{stderr}").contains("party_out_of_range"), "{stdout}{stderr}");
}

#[test]
fn refuses_an_extend_beyond_the_longest_hold_before_connecting() {
    let out = seatq(&["extend", "--booking", "1", "--customer", "ann", "--hold-seconds", "86401"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("hold_time_out_of_range"), "{stdout}");
}

#[test]
fn refuses_a_prune_age_so_long_that_it_would_overflow() {
    // 2^64 / 3600 + 1 hours: in seconds it would wrap to a tiny age and prune
    // recent requests. Refused before connecting.
    let huge = (u64::MAX / 3600 + 1).to_string();
    let out = seatq(&["prune", "--older-than-hours", &huge]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--older-than-hours") && stderr.contains("0..=1000000"), "{stderr}");
}

#[test]
fn prints_completion_scripts_for_every_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _seatq"),
        ("zsh", "#compdef seatq"),
        ("fish", "complete -c seatq"),
        ("elvish", "edit:completion:arg-completer[seatq]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = seatq(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell}: no {marker:?} in\n{script}");
        assert!(script.contains("hold") && script.contains("party"), "{shell}: commands and options");
    }
    let out = seatq(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bash"), "names the shells it knows: {out:?}");
}

#[test]
fn prints_its_manual_pages() {
    let out = seatq(&["man"]);
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH seatq 1"), "{page}");
    for text in ["\\-\\-database\\-url", "DATABASE_URL", "hold", "Exit status"] {
        assert!(page.contains(text), "{text:?} missing from\n{page}");
    }
    let out = seatq(&["man", "hold"]);
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH seatq-hold 1") && page.contains("<1\\-9>"), "{page}");
    let out = seatq(&["--json", "man", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let error: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["error"]["code"], "usage", "{error}");
}

#[test]
fn help_shows_ranges_defaults_and_exit_statuses() {
    let hold = help(&["hold"]);
    for text in ["--party <1-9>", "--class <1-32767>", "--hold-seconds <1-86400>", "[default: 600]", "[default: 0]"] {
        assert!(hold.contains(text), "{text:?} missing from\n{hold}");
    }
    let help = help(&[]);
    assert!(help.contains("Exit status: 0") && help.contains(r#"{"error": {"code": CODE"#), "{help}");
}

/// The one JSON document `seatq --json` printed on standard output, for a
/// run that failed with exit status 2 (and nothing else on stdout).
fn json_error(out: &std::process::Output) -> (String, String) {
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {out:?}"));
    let error = &doc["error"];
    let (code, message) = (error["code"].as_str(), error["message"].as_str());
    (
        code.unwrap_or_else(|| panic!("no code: {doc}")).into(),
        message.unwrap_or_else(|| panic!("no message: {doc}")).into(),
    )
}

#[test]
fn with_json_errors_are_json_too() {
    // The database cannot be reached.
    let (code, message) = json_error(&seatq(&["--json", "stats"]));
    assert_eq!(code, "unreachable");
    assert!(message.contains("cannot reach PostgreSQL at 127.0.0.1:1/none"), "{message}");
    // A file that cannot be read.
    let (code, message) = json_error(&seatq(&["--json", "enqueue", "--file", "/nonexistent/seatq.jsonl"]));
    assert_eq!(code, "io");
    assert!(message.contains("/nonexistent/seatq.jsonl"), "{message}");
    // Arguments clap refuses, before --json or after it.
    let (code, message) = json_error(&seatq(&["--json", "hold", "--event", "x", "--customer", "ann"]));
    assert_eq!(code, "usage");
    assert!(message.contains("--event"), "{message}");
    let (code, message) = json_error(&seatq(&["prune", "--older-than-hours", "1000001", "--json"]));
    assert_eq!(code, "usage");
    assert!(message.contains("--older-than-hours") && message.contains("0..=1000000"), "{message}");
    let (code, _) = json_error(&seatq(&["--json"]));
    assert_eq!(code, "usage");
    // Without --json the same errors are text on standard error.
    let out = seatq(&["stats"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stdout.is_empty() && String::from_utf8_lossy(&out.stderr).starts_with("error: cannot reach"),
        "{out:?}"
    );
    // A refused request keeps its own shape and exit status 1.
    let out = seatq(&["--json", "hold", "--event", "1", "--class", "2", "--party", "12", "--customer", "ann"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let refusal: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(refusal["error_code"], "party_out_of_range", "{refusal}");
    // --help and --version are not errors.
    assert!(seatq(&["--json", "--version"]).status.success());
}
