//! What seatq's own binaries (`seatq`, `seatq-worker`, `seatq-bench`, the
//! demo) share: logging set-up, and a check that their command lines explain
//! themselves.

/// What a person can do about an error, where seatq knows: the paragraph a
/// binary prints under the error when no PostgreSQL server answers. Ask it
/// of each cause (`anyhow::Error::chain().find_map(help)`).
pub fn help(cause: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    match cause.downcast_ref::<crate::Error>()? {
        crate::Error::Unreachable { .. } => Some(
            "seatq needs a PostgreSQL server (version 14 or later). Start the local one (on Debian: \
             `pg_ctlcluster 15 main start`), or install it (`apt-get install postgresql`), or point \
             DATABASE_URL at a server you can use, e.g. DATABASE_URL=postgres://user:password@host:5432/seatq. \
             seatq creates the database and its schema itself on first use.",
        ),
        _ => None,
    }
}

/// Log through `tracing` to stderr, filtered by `RUST_LOG` (else by
/// `default`, e.g. `"info"`), as text or JSON lines.
pub fn init_tracing(json: bool, default: &str) {
    use tracing_subscriber::EnvFilter;
    // sqlx logs every statement at info; keep it to warnings (slow statements) or quieter.
    let sqlx = if matches!(default, "error" | "off") { default } else { "warn" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(format!("{default},sqlx={sqlx}")));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// For each binary's tests: panics, naming them, if a command of `command`
/// (or of its subcommands) has no about line or a visible argument has no
/// help, or if clap's own `debug_assert` finds the definition inconsistent.
#[track_caller]
pub fn assert_documented(command: clap::Command) {
    command.clone().debug_assert();
    let mut root = command;
    root.build();
    let mut missing = Vec::new();
    let mut commands = vec![(root.get_name().to_string(), &root)];
    while let Some((path, cmd)) = commands.pop() {
        if cmd.get_about().is_none() {
            missing.push(path.clone());
        }
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set() && a.get_help().is_none()) {
            missing.push(format!("{path} {}", arg.get_id()));
        }
        commands.extend(cmd.get_subcommands().map(|sub| (format!("{path} {}", sub.get_name()), sub)));
    }
    assert!(missing.is_empty(), "without help: {missing:?}");
}
