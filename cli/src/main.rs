//! `seatq`: enqueue booking requests, read outcomes, inspect the queue.

/// Every line the command prints goes through [`print_line`], not std's
/// `println!`, which panics when whoever reads standard output has gone
/// (`seatq availability --seats | head -3`). Defined before the modules, so
/// that it is theirs too.
macro_rules! println {
    () => {
        $crate::print_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::print_line(format_args!($($arg)*))
    };
}

mod batch;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::{Args as ClapArgs, CommandFactory as _, Parser, Subcommand};
use seatq::Retry;
use seatq::outcome::{money, money_range};
use seatq::{
    BookingRef, Client, HoldExtension, HoldToken, NewRequest, Request, RequestError, RequestRecord, SeatRequest, Status,
};
use tokio::time::Instant;

/// How long one wait for a connection (connecting included) may take before
/// it counts as a failed attempt and is retried.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Exit statuses and errors, shown at the end of `seatq --help` (and in the
/// man page).
const AFTER_HELP: &str = "\
Exit status: 0 done; 1 refused, failed or dead (the request's outcome is printed), a broken invariant \
(check), an event without seats (availability), bad lines in a file or a party that failed (enqueue), no such batch \
(batch), nothing to retry (retry ID); 2 error (bad arguments, database unreachable, file unreadable, timed out waiting).

With --json, standard output holds one JSON document: the result, or on an error \
{\"error\": {\"code\": CODE, \"message\": TEXT}} with exit status 2. CODE is one of usage, bad_url, \
unreachable, database, commit_unknown, migration, old_schema, schema_mismatch, not_found, timeout, io (a file, standard input or \
output), internal. A refused request prints {\"error_code\", \"error_message\"}, as a failed request's \
record does. Standard error holds only log lines (retries) and, for enqueue, the bad lines (and, on a \
terminal, the progress bar of --wait).";

/// seatq: a seat-booking queue in PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "seatq", version, after_long_help = AFTER_HELP)]
struct Cli {
    /// PostgreSQL URL; the database is created and migrated if missing.
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true, default_value = seatq::db::DEFAULT_DATABASE_URL)]
    database_url: String,
    /// With a --database-url through a transaction pooler (?pool_mode=transaction): a direct or
    /// session-mode URL for what needs a session (creating the database, migrations, waiting by LISTEN).
    #[arg(long, global = true, env = "SEATQ_SESSION_URL", hide_env_values = true)]
    session_url: Option<String>,
    /// Print JSON instead of text, errors included: {"error": {"code", "message"}} on standard
    /// output, with the same exit status (see --help).
    #[arg(long, global = true)]
    json: bool,
    /// Keep retrying for this many seconds when the database cannot be
    /// reached or the connection is lost (connecting, enqueueing, waiting,
    /// status); 0 = no retry. Retries are safe: a request is enqueued under
    /// an idempotency key (a random one unless --key names one), and a file
    /// in one transaction.
    #[arg(long, global = true, env = "SEATQ_RETRY_SECS", default_value_t = 30, value_name = "SECS")]
    retry_secs: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create the database if needed and apply migrations.
    Migrate,
    /// Create the demo inventory: FLIGHTS events ("Flight 1".."Flight N") of SEATS seats (idempotent).
    Seed {
        /// Events to create.
        #[arg(long, default_value_t = 10)]
        flights: i32,
        /// Seats per event, six to a row, priced by class.
        #[arg(long, default_value_t = 250)]
        seats: i32,
    },
    /// Events: import a venue's seat map, list, show, close sales.
    Event {
        #[command(subcommand)]
        command: EventCommand,
    },
    /// Hold seats for a while (confirm or cancel later).
    Hold {
        #[command(flatten)]
        seats: SeatArgs,
        /// Hold time in seconds, 1 to 86400 [default: 600].
        #[arg(long, value_name = "1-86400")]
        hold_seconds: Option<u32>,
        #[command(flatten)]
        queue: QueueArgs,
    },
    /// Book seats at once.
    Book {
        #[command(flatten)]
        seats: SeatArgs,
        #[command(flatten)]
        queue: QueueArgs,
    },
    /// Confirm a hold.
    Confirm {
        #[command(flatten)]
        booking: BookingArgs,
        #[command(flatten)]
        queue: QueueArgs,
    },
    /// Cancel a hold or booking.
    Cancel {
        #[command(flatten)]
        booking: BookingArgs,
        #[command(flatten)]
        queue: QueueArgs,
    },
    /// Lengthen a live hold: held until now + --hold-seconds, but never past 86400 seconds after the
    /// hold was made, and never shorter than it is.
    Extend {
        #[command(flatten)]
        booking: BookingArgs,
        /// Seconds from now, 1 to 86400 [default: 600].
        #[arg(long, value_name = "1-86400")]
        hold_seconds: Option<u32>,
        #[command(flatten)]
        queue: QueueArgs,
    },
    /// Enqueue a file of requests as a batch: JSON lines {"kind", "payload", "ref"?, "idempotency_key"?,
    /// "priority"?, "run_at"?} or CSV (a header naming kind, ref and the payload's fields). Each line is enqueued
    /// under a key derived from the batch's name and its ref (or its content), so submitting the file again
    /// enqueues only what is missing. Bad lines (malformed, a ref used twice, a key reused for another request)
    /// are reported (file:line: code: reason) and the good ones enqueued, all in one transaction; exits 1 if
    /// any line was bad (or, with --wait, any party failed). See docs/group-bookings.md.
    Enqueue {
        #[command(flatten)]
        args: batch::EnqueueArgs,
    },
    /// Batches: a batch's counts by status and outcome, or every request's outcome.
    Batch {
        #[command(subcommand)]
        command: batch::BatchCommand,
    },
    /// Print a new hold token (32 random bytes from the operating system, URL-safe base64): give it to
    /// hold or book with --token, and the booking answers to that token alone (confirm, cancel and extend
    /// need it). The database keeps only its hash.
    Token,
    /// Show a request.
    Status {
        /// The request's id (as enqueueing printed it).
        id: i64,
    },
    /// Wait for a request's outcome and show it.
    Wait {
        /// The request's id (as enqueueing printed it).
        id: i64,
        /// Give up after this many seconds (exit status 2) [default: wait as long as it takes].
        #[arg(long, value_name = "SECS")]
        timeout: Option<u64>,
    },
    /// Free seats and prices of an event, per class (with --seats, the seat map); exits 1 if it has no seats.
    Availability {
        /// The event.
        #[arg(long)]
        event: i64,
        /// Also show the seat map, a row a line by the venue's names: free, held, booked or not for sale.
        #[arg(long)]
        seats: bool,
    },
    /// Queue depth by status, oldest queued age, seats by state.
    Stats,
    /// Check seatq's invariants; exits 1 if any is broken.
    Check,
    /// List live workers (heartbeat within the last 10 seconds).
    Workers,
    /// Put dead requests back in the queue.
    Retry {
        /// The dead request to retry.
        #[arg(required_unless_present = "all_dead", conflicts_with = "all_dead")]
        id: Option<i64>,
        /// Retry every dead request.
        #[arg(long)]
        all_dead: bool,
    },
    /// Delete finished requests older than the given age now (workers also do this every minute,
    /// for requests older than their --retention-hours).
    Prune {
        /// Age in hours, 0 to 1000000.
        #[arg(long, default_value_t = 7 * 24, value_parser = clap::value_parser!(u64).range(0..=seatq_core::limits::MAX_RETENTION_HOURS))]
        older_than_hours: u64,
    },
    /// Serve the HTTP API, the checkout page and the operator dashboard (docs/http.md) until SIGINT or
    /// SIGTERM.
    Serve(Box<ServeArgs>),
    /// Print a shell completion script, e.g. `seatq completions bash > /etc/bash_completion.d/seatq`.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `seatq man | man -l -`.
    Man {
        /// The page of this command (e.g. hold) instead of seatq's.
        command: Option<String>,
    },
}

#[derive(Debug, ClapArgs)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "SEATQ_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    addr: std::net::SocketAddr,
    /// Turn the JSON API off (the checkout page needs it: turn that off too).
    #[arg(long, env = "SEATQ_NO_API")]
    no_api: bool,
    /// Turn the checkout page (/shop/EVENT) off.
    #[arg(long, env = "SEATQ_NO_SHOP")]
    no_shop: bool,
    /// Turn the operator dashboard (/dashboard) off.
    #[arg(long, env = "SEATQ_NO_DASHBOARD")]
    no_dashboard: bool,
    /// Read the operator token from this file (its first line). Else it comes from the environment
    /// variable SEATQ_OPERATOR_TOKEN; never from the command line, where `ps` would show it. Without
    /// one, operator actions (retrying dead requests) are off.
    #[arg(long, env = "SEATQ_OPERATOR_TOKEN_FILE", value_name = "PATH")]
    operator_token_file: Option<std::path::PathBuf>,
    /// Reading the dashboard and /api/ops/... needs the operator token too (else reading is open).
    #[arg(long, env = "SEATQ_PROTECT_READS")]
    protect_reads: bool,
    /// Database connections of the server, 1 to 1000 (waiting for outcomes takes one more, however many
    /// wait).
    #[arg(long, env = "SEATQ_HTTP_POOL", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pool_size: u32,
    /// Read availability and seat maps (the shop's page views) from this hot standby's URL rather than the
    /// primary's (see docs/operations.md, "Production PostgreSQL").
    #[arg(long, env = "SEATQ_READ_URL", hide_env_values = true)]
    read_url: Option<String>,
    /// The longest an HTTP request may take, in seconds, 3 to 3600 (a long-poll waits a little less).
    #[arg(long, env = "SEATQ_HTTP_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(3..=3600))]
    request_timeout_secs: u64,
    /// Close a connection whose request line and headers are not all in within this many seconds,
    /// 1 to 300 (also an idle connection between requests): a client that never finishes its request
    /// holds nothing for long.
    #[arg(long, env = "SEATQ_HTTP_HEADER_TIMEOUT_SECS",
          default_value_t = seatq_core::http::DEFAULT_HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(seatq_core::http::HEADER_TIMEOUT_SECS))]
    header_timeout_secs: u64,
    /// The origin customers and operators reach the server at, behind the proxy that ends TLS
    /// (https://tickets.example.com): the server answers to its host, takes operator actions from its
    /// pages, and with https marks the operator cookie Secure.
    #[arg(long, env = "SEATQ_PUBLIC_ORIGIN", value_name = "URL")]
    public_origin: Option<String>,
    /// More host names the server answers to (NAME on any port, or NAME:PORT), comma-separated. It always
    /// answers to localhost, loopback addresses and the address it is reached at; any other Host is
    /// refused (DNS rebinding).
    #[arg(long, env = "SEATQ_ALLOWED_HOSTS", value_delimiter = ',', value_name = "HOST,...")]
    allowed_host: Vec<String>,
    /// Reverse proxies in front (addresses or networks, comma-separated) whose client-address header is
    /// believed; without one, the client is the connection's peer.
    #[arg(long, env = "SEATQ_TRUSTED_PROXIES", value_delimiter = ',', value_name = "ADDR|NET,...",
          value_parser = seatq_server::limits::parse_net)]
    trusted_proxy: Vec<seatq_server::IpNet>,
    /// The header a trusted proxy names the client in (a list of addresses, the nearest hop last).
    #[arg(long, env = "SEATQ_CLIENT_IP_HEADER", default_value = "X-Forwarded-For", value_name = "HEADER")]
    client_ip_header: seatq_server::Header,
    /// Clients never rate limited nor bounded in connections (addresses or networks, comma-separated):
    /// the shop's own backends, which enqueue for many customers.
    #[arg(long, env = "SEATQ_RATE_LIMIT_EXEMPT", value_delimiter = ',', value_name = "ADDR|NET,...",
          value_parser = seatq_server::limits::parse_net)]
    rate_limit_exempt: Vec<seatq_server::IpNet>,
    /// Requests per client address, as COUNT/PERIOD (a burst of COUNT, then COUNT a PERIOD evenly: 20/s,
    /// 60/min, 10/10min, 500/h), or off.
    #[arg(long, env = "SEATQ_RATE_PER_ADDRESS", default_value = "50/s", value_name = "RATE")]
    rate_per_address: seatq_server::MaybeRate,
    /// Enqueues (POST /api/requests) per client address, or off.
    #[arg(long, env = "SEATQ_ENQUEUES_PER_ADDRESS", default_value = "60/min", value_name = "RATE")]
    enqueues_per_address: seatq_server::MaybeRate,
    /// Enqueues per customer (the payload's customer, in seatq's normal form), or off.
    #[arg(long, env = "SEATQ_ENQUEUES_PER_CUSTOMER", default_value = "20/min", value_name = "RATE")]
    enqueues_per_customer: seatq_server::MaybeRate,
    /// Holds and bookings (kinds hold and book) per client address and event, whatever the customer's
    /// name, or off.
    #[arg(long, env = "SEATQ_HOLDS_PER_EVENT", default_value = "10/10min", value_name = "RATE")]
    holds_per_event: seatq_server::MaybeRate,
    /// Wrong operator tokens per client address before it is slowed down (its tokens then not even
    /// compared), or off.
    #[arg(long, env = "SEATQ_FAILED_SIGNINS", default_value = "5/min", value_name = "RATE")]
    failed_signins: seatq_server::MaybeRate,
    /// Connections open at once per client address (an IPv6 client by its /64); 0 for no bound.
    #[arg(long, env = "SEATQ_CONNECTIONS_PER_ADDRESS",
          default_value_t = seatq_core::http::DEFAULT_CONNECTIONS_PER_ADDRESS)]
    connections_per_address: usize,
    /// Take the customer from a signed assertion: the `Seatq-Customer` header holds an HS256 JSON Web
    /// Token (claims sub, the customer, and exp) signed with the key in PATH (at least 32 bytes; its first
    /// line, trimmed). A request without a valid one is refused, and so is a payload naming another customer.
    #[arg(long, env = "SEATQ_CUSTOMER_KEY_FILE", value_name = "PATH", conflicts_with = "customer_header")]
    customer_key_file: Option<std::path::PathBuf>,
    /// Take the customer from this header, set by a trusted proxy in front (--trusted-proxy; the header
    /// is believed from no one else). A payload naming another customer is refused.
    #[arg(long, env = "SEATQ_CUSTOMER_HEADER", value_name = "HEADER")]
    customer_header: Option<seatq_server::Header>,
    /// The currency the venues' prices are in, an ISO 4217 code (GBP, EUR, USD, CHF, ...): the checkout
    /// page and the dashboard show every price with it ("£45.00", "CHF 45.00").
    #[arg(long, env = "SEATQ_CURRENCY", default_value = "GBP", value_name = "CODE")]
    currency: seatq_server::Currency,
    /// Log as JSON lines.
    #[arg(long, env = "SEATQ_LOG_JSON")]
    log_json: bool,
}

#[derive(Debug, ClapArgs)]
struct SeatArgs {
    /// The event's id (seat numbers are per event).
    #[arg(long)]
    event: i64,
    /// Seat class, 1 to 32767 (required unless --seats names the seats).
    #[arg(long, value_name = "1-32767")]
    class: Option<i16>,
    /// Party size, 1 to 9 [default: the number of --seats].
    #[arg(long, value_name = "1-9")]
    party: Option<u32>,
    /// Who the seats are for, 1 to 200 characters; confirm and cancel must name the same.
    #[arg(long)]
    customer: String,
    /// Exact seat numbers, comma-separated, at most 9: all of them or none.
    #[arg(long, value_delimiter = ',', value_name = "SEAT,...")]
    seats: Vec<i32>,
    /// Take what is left if fewer seats remain.
    #[arg(long)]
    partial: bool,
    /// Seat the party side by side in one row.
    #[arg(long)]
    together: bool,
    /// Rather than be refused when sold out, join the event's waiting list for up to this many
    /// seconds (1 to 604800): seats that come free are handed over in order.
    #[arg(long, value_name = "SECS")]
    wait_seconds: Option<u32>,
    /// The hold token the booking answers to (make one with `seatq token`); a booking made
    /// without one answers to its customer alone.
    #[arg(long, env = "SEATQ_HOLD_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    token: Option<HoldToken>,
}

#[derive(Debug, ClapArgs)]
struct BookingArgs {
    /// The booking's id (from the hold's or booking's outcome).
    #[arg(long)]
    booking: i64,
    /// The customer the booking is for.
    #[arg(long)]
    customer: String,
    /// The booking's event: optional on one PostgreSQL server, required on Citus, where it
    /// routes the request to the node that keeps the booking.
    #[arg(long)]
    event: Option<i64>,
    /// The hold token the booking answers to (make one with `seatq token`); a booking made
    /// without one answers to its customer alone.
    #[arg(long, env = "SEATQ_HOLD_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    token: Option<HoldToken>,
}

#[derive(Debug, ClapArgs)]
struct QueueArgs {
    /// Idempotency key: enqueueing again with the same key returns the first request instead of
    /// booking twice (default: a random key, so that this command's own retries are safe).
    #[arg(long)]
    key: Option<String>,
    /// Higher runs first, -32768 to 32767.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    priority: i16,
    /// Not to be processed before this time, in RFC 3339 (e.g. 2030-01-31T18:00:00Z or
    /// 2030-01-31T19:00:00+01:00) [default: at once].
    #[arg(long, value_name = "TIME", value_parser = rfc3339)]
    at: Option<chrono::DateTime<chrono::Utc>>,
    /// Block until the outcome is known and print it.
    #[arg(long)]
    wait: bool,
}

/// A time in RFC 3339, for `--at`.
fn rfc3339(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| format!("{e}: expected an RFC 3339 time such as 2030-01-31T18:00:00Z"))
}

/// An event's own fields, as `event import` sets them (over a JSON file's)
/// and `event edit` changes them: each given replaces, each left out is kept.
#[derive(Debug, ClapArgs)]
struct EventFields {
    /// The event's name (import: required for CSV; overrides the JSON's).
    #[arg(long)]
    name: Option<String>,
    /// Where it takes place.
    #[arg(long)]
    venue: Option<String>,
    /// When it starts (RFC 3339). On import, sales end then unless --sales-until says otherwise; an edit
    /// does not move --sales-until.
    #[arg(long, value_name = "TIME", value_parser = rfc3339)]
    starts_at: Option<DateTime<Utc>>,
    /// On sale from (RFC 3339) [import default: at once].
    #[arg(long, value_name = "TIME", value_parser = rfc3339)]
    sales_from: Option<DateTime<Utc>>,
    /// On sale until (RFC 3339) [import default: the start].
    #[arg(long, value_name = "TIME", value_parser = rfc3339)]
    sales_until: Option<DateTime<Utc>>,
    /// At most this many seats per customer (live holds and bookings) [import default: no limit].
    #[arg(long, value_name = "SEATS")]
    per_customer: Option<i32>,
}

impl From<EventFields> for seatq::EventChanges {
    fn from(f: EventFields) -> Self {
        let EventFields { name, venue, starts_at, sales_from, sales_until, per_customer } = f;
        seatq::EventChanges { name, venue, starts_at, sales_from, sales_until, per_customer }
    }
}

#[derive(Debug, Subcommand)]
enum EventCommand {
    /// Create an event from a venue file, all or nothing: CSV (a header naming
    /// section,row,seat,pos,class,price,for_sale, then a seat a line) or JSON (an object with the event's
    /// fields and a "seats" array). Bad lines are reported (file:line: code: reason) and nothing is
    /// imported; exits 1 if any line was bad.
    Import {
        /// The file (.csv or .json; "-" for CSV on standard input).
        #[arg(long)]
        file: String,
        #[command(flatten)]
        fields: EventFields,
    },
    /// List the events, with their sales windows and seat counts.
    List,
    /// Show an event and its seats by section, class and state.
    Show {
        /// The event's id.
        id: i64,
    },
    /// Stop an event's sales now: holds and books are refused (sales_closed), and live holds lapse at
    /// once (a hold never outlives its event's sales). To let checkouts under way finish, move
    /// --sales-until a few minutes ahead with `seatq event edit` instead.
    Close {
        /// The event's id.
        id: i64,
    },
    /// Close an event's waiting list: it takes no one from now on, and the parties on it are told
    /// sold_out at once. (Sales go on; `seatq event close` stops them.)
    CloseList {
        /// The event's id.
        id: i64,
    },
    /// Set the order an event's waiting list is served in: strict (arrival order; a party that
    /// does not fit yet keeps the seats that come free), first-fit (whoever the free seats
    /// complete), or bounded (first fit until as many seats as a party wants went past it; then it
    /// comes first: the default).
    ListOrder {
        /// The event's id.
        id: i64,
        /// strict, first-fit or bounded.
        #[arg(value_parser = parse_waitlist_order)]
        order: seatq::WaitlistOrder,
    },
    /// Correct an event: rename it, move its start or its sales window, change its venue or its
    /// per-customer limit. Fields not given are kept; live holds are cut to the end of the sales as
    /// edited. --starts-at does not move --sales-until: give both to move both.
    Edit {
        /// The event's id.
        id: i64,
        #[command(flatten)]
        fields: EventFields,
    },
    /// Delete an event nobody has booked (a test import, a wrong file) with its seats. Refused
    /// (event_in_use) once it has any booking or a queued request: close it instead.
    Delete {
        /// The event's id.
        id: i64,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return refused_command_line(e),
    };
    match &cli.command {
        // A server logs what it serves; a command only its retries.
        Command::Serve(args) => seatq_core::bin::init_tracing(args.log_json, "info"),
        _ => seatq_core::bin::init_tracing(false, "warn"),
    }
    let json = cli.json;
    match run(cli).await {
        Ok(code) => code,
        // The reader of standard output went away (`| head`): see print_line.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            print_error(error_code(&e), &error_text(&e), json);
            if let Some(help) = e.chain().find_map(seatq_core::bin::help).filter(|_| !json) {
                eprintln!("\n{help}");
            }
            ExitCode::from(2)
        }
    }
}

/// A command line clap did not take: its message as text (clap's own, with
/// the usage) or, if `--json` is among the arguments, as JSON; exit status
/// 2. `--help` and `--version` print as usual.
fn refused_command_line(e: clap::Error) -> ExitCode {
    let json = std::env::args_os().skip(1).take_while(|a| a != "--").any(|a| a == "--json");
    if !json || !e.use_stderr() {
        e.exit();
    }
    // clap's text without its "error: ", the usage and the hint after it.
    let text = e.render().to_string();
    let message = text.split("\n\n").next().unwrap_or_default().trim();
    let message = message.strip_prefix("error: ").unwrap_or(message);
    print_error("usage", message, true);
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// Print an error: `error: message` on standard error, or with `--json`
/// `{"error": {"code", "message"}}` on standard output (where the result
/// would have been).
fn print_error(code: &str, message: &str, json: bool) {
    if json {
        println!("{}", serde_json::json!({ "error": { "code": code, "message": message } }));
    } else {
        eprintln!("error: {message}");
    }
}

/// A command line that parsed but cannot be carried out as it is: no batch
/// name, settings that do not fit together, no such command's manual.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Usage(String);

/// An event that does not exist: `not_found`, as a request that does not.
#[derive(Debug, thiserror::Error)]
#[error("no event {0}")]
struct NoEvent(i64);

/// The `code` of an error printed as JSON (the list is in `AFTER_HELP`).
fn error_code(e: &anyhow::Error) -> &'static str {
    for cause in e.chain() {
        if let Some(e) = cause.downcast_ref::<seatq::Error>() {
            return e.code();
        }
        if cause.is::<std::io::Error>() {
            return "io";
        }
        if cause.is::<Usage>() {
            return "usage";
        }
        if cause.is::<NoEvent>() {
            return "not_found";
        }
    }
    "internal"
}

/// The error and its causes, each shown once: many errors (sqlx's among
/// them) repeat their cause in their own message, which `{:#}` would print
/// again.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// What every command needs: where the database is, how to print, how to retry.
struct Ctx {
    database_url: String,
    session_url: Option<String>,
    json: bool,
    retry: Retry,
}

impl Ctx {
    /// Connect (creating the database and applying migrations if needed),
    /// retrying while the server cannot be reached.
    async fn connect(&self) -> anyhow::Result<Client> {
        let target = seatq::reach::Target::parse(&self.database_url, self.session_url.as_deref())?;
        Ok(self.retry.run("connecting", || Client::connect_to(&target, ACQUIRE_TIMEOUT)).await?)
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let ctx = Ctx {
        database_url: cli.database_url,
        session_url: cli.session_url,
        json: cli.json,
        retry: Retry::within(Duration::from_secs(cli.retry_secs)),
    };
    let json = ctx.json;
    match cli.command {
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "seatq", &mut script);
            print_raw(&script).context("writing the completion script")?;
        }
        Command::Man { command } => {
            print_raw(&manual(command.as_deref())?).context("writing the manual page")?;
        }
        Command::Serve(args) => return serve(&ctx, *args).await,
        Command::Migrate => {
            ctx.connect().await?;
            println!("migrations applied");
        }
        Command::Seed { flights, seats } => {
            let ids = ctx.connect().await?.seed(flights, seats).await?;
            if json {
                println!("{}", serde_json::json!({ "events": ids }));
            } else {
                println!("{} events of {seats} seats: ids {:?}", ids.len(), ids);
            }
        }
        Command::Event { command } => return event(&ctx, command).await,
        Command::Hold { seats, hold_seconds, queue } => {
            let mut r = seat_request(seats);
            r.hold_seconds = hold_seconds;
            return submit(&ctx, Request::Hold(r), queue).await;
        }
        Command::Book { seats, queue } => {
            return submit(&ctx, Request::Book(seat_request(seats)), queue).await;
        }
        Command::Confirm { booking, queue } => {
            let r = BookingRef {
                event: booking.event,
                booking: booking.booking,
                customer: booking.customer,
                token: booking.token,
            };
            return submit(&ctx, Request::Confirm(r), queue).await;
        }
        Command::Cancel { booking, queue } => {
            let r = BookingRef {
                event: booking.event,
                booking: booking.booking,
                customer: booking.customer,
                token: booking.token,
            };
            return submit(&ctx, Request::Cancel(r), queue).await;
        }
        Command::Extend { booking, hold_seconds, queue } => {
            let r = HoldExtension {
                event: booking.event,
                booking: booking.booking,
                customer: booking.customer,
                hold_seconds,
                token: booking.token,
            };
            return submit(&ctx, Request::Extend(r), queue).await;
        }
        Command::Token => {
            println!("{}", HoldToken::new()?);
            return Ok(ExitCode::SUCCESS);
        }
        Command::Enqueue { args } => return batch::enqueue_file(&ctx, args).await,
        Command::Batch { command } => return batch::batch(&ctx, command).await,
        Command::Status { id } => {
            let client = ctx.connect().await?;
            let record = ctx.retry.run("reading the request", || client.status(id)).await?;
            return Ok(show(&record, json));
        }
        Command::Wait { id, timeout } => {
            let client = ctx.connect().await?;
            return Ok(show(&wait(&ctx, &client, id, timeout.map(Duration::from_secs)).await?, json));
        }
        Command::Stats => {
            let stats = ctx.connect().await?.stats().await?;
            if json {
                println!("{}", serde_json::to_string(&stats)?);
            } else {
                println!("requests:");
                for (status, n) in &stats.requests {
                    println!("  {status:<10} {n}");
                }
                if let Some(age) = stats.oldest_queued_secs {
                    println!("oldest queued: {age:.1}s");
                }
                println!("seats:");
                for (state, n) in &stats.seats {
                    println!("  {state:<10} {n}");
                }
            }
        }
        Command::Availability { event, seats } => {
            let client = ctx.connect().await?;
            let classes = client.availability(event).await?;
            let map = if seats { client.seat_map(event).await? } else { Vec::new() };
            if json {
                let mut doc = serde_json::json!({ "event": event, "classes": classes });
                if seats {
                    doc["seats"] = serde_json::to_value(&map)?;
                }
                println!("{doc}");
            } else {
                print_availability(event, &classes, &map);
            }
            if classes.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Workers => {
            let workers = ctx.connect().await?.workers().await?;
            if json {
                println!("{}", serde_json::to_string(&workers)?);
            } else {
                println!("{} live worker(s)", workers.len());
                for w in &workers {
                    println!(
                        "  {:<28} host {} pid {} up since {} heartbeat {:.1}s ago  {}",
                        w.name,
                        w.host,
                        w.pid,
                        w.started_at.format("%Y-%m-%d %H:%M:%S"),
                        w.heartbeat_age_secs,
                        w.settings
                    );
                }
            }
        }
        // `id` is given exactly when `--all-dead` is not (clap: required
        // unless, and conflicting with, `--all-dead`).
        Command::Retry { id, all_dead: _ } => {
            let ids = ctx.connect().await?.retry_dead(id).await?;
            let missing = id.filter(|_| ids.is_empty());
            if json {
                println!("{}", serde_json::json!({ "requeued": ids }));
            } else if let Some(id) = missing {
                println!("no dead request {id}: nothing requeued");
            } else {
                println!("requeued {} dead request(s): {ids:?}", ids.len());
            }
            if missing.is_some() {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Prune { older_than_hours } => {
            let n = ctx.connect().await?.prune(Duration::from_secs(older_than_hours * 3600)).await?;
            if json {
                println!("{}", serde_json::json!({ "pruned": n }));
            } else {
                println!("pruned {n} finished request(s)");
            }
        }
        Command::Check => {
            let violations = ctx.connect().await?.check_invariants(false).await?;
            if json {
                println!("{}", serde_json::to_string(&violations)?);
            } else if violations.is_empty() {
                println!("invariants hold");
            } else {
                for v in &violations {
                    println!("{}: {}", v.violation, v.detail);
                }
            }
            if !violations.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The classes of an event as a table, then the seat map (if any) a row a
/// line named as the venue names it, one mark per seat.
fn print_availability(event: i64, classes: &[seatq::ClassAvailability], map: &[seatq::MapSeat]) {
    use seatq::SeatAvailability as A;
    if classes.is_empty() {
        println!("event {event} has no seats");
        return;
    }
    println!(
        "{:>5} {:>7} {:>7} {:>7} {:>7}  {:<21} all prices",
        "class", "seats", "free", "held", "booked", "free seats' prices"
    );
    for c in classes {
        println!(
            "{:>5} {:>7} {:>7} {:>7} {:>7}  {:<21} {}",
            c.class,
            c.seats,
            c.free,
            c.held,
            c.booked,
            c.prices.free_range().unwrap_or_else(|| "-".to_string()),
            c.prices.range()
        );
    }
    if map.is_empty() {
        return;
    }
    println!("\nseat map (. free, h held, B booked, x not for sale):");
    // Rows by the venue's names (section and row label), as a box office
    // calls them; the row numbers are only for drawing.
    let section_width = map.iter().map(|s| s.section.chars().count()).max().unwrap_or(0);
    let label_width = map.iter().map(|s| s.row_label.chars().count()).max().unwrap_or(0);
    for row in map.chunk_by(|a, b| a.row == b.row) {
        let marks: Vec<&str> = row
            .iter()
            .map(|s| match s.state {
                A::Free => ".",
                A::Held => "h",
                A::Booked => "B",
                A::NotForSale => "x",
            })
            .collect();
        let (first, last) = (row[0].seat, row[row.len() - 1].seat);
        println!(
            "{:<section_width$}  row {:<label_width$}  {}  seats {first}-{last}",
            row[0].section,
            row[0].row_label,
            marks.join(" ")
        );
    }
}

/// Print a line on standard output. When the reader has gone (a closed
/// pipe), the command ends there, quietly and with status 0, as Unix tools
/// do: what it printed was read as far as it was wanted, and whatever it did
/// in the database is committed or not as the command left it. Any other
/// write error is said on standard error, and ends the command with status 2.
pub(crate) fn print_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to standard output: {e}");
        std::process::exit(2);
    }
}

/// Whether `error` comes of writing to a reader that has gone.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .any(|cause| cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}

/// Write `bytes` to standard output as they are.
fn print_raw(bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// The manual page (roff) of seatq, or of one of its commands.
fn manual(command: Option<&str>) -> anyhow::Result<Vec<u8>> {
    let mut cli = Cli::command();
    // Built, so that commands carry the global options and their full names.
    cli.build();
    let page = match command {
        None => cli,
        Some(name) => match cli.find_subcommand(name) {
            Some(command) => command.clone().version(env!("CARGO_PKG_VERSION")),
            None => {
                let names: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).collect();
                return Err(Usage(format!("no command {name:?}: expected one of {}", names.join(", "))).into());
            }
        },
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    Ok(out)
}

/// `strict`, `first-fit` or `bounded` (as `first_fit` is stored).
fn parse_waitlist_order(text: &str) -> Result<seatq::WaitlistOrder, String> {
    text.replace('-', "_").parse().map_err(|_| format!("{text:?}: expected strict, first-fit or bounded"))
}

fn order_words(order: seatq::WaitlistOrder) -> &'static str {
    match order {
        seatq::WaitlistOrder::Strict => "in strict order",
        seatq::WaitlistOrder::FirstFit => "first fit",
        seatq::WaitlistOrder::Bounded => "first fit, bounded",
    }
}

/// An event's line and waiting list in one line, as `seatq event show` prints it.
fn waiting_line(l: &seatq::WaitingList) -> String {
    let oldest = l.oldest.map(|t| format!(", longest since {}", t.format("%Y-%m-%d %H:%M:%S UTC"))).unwrap_or_default();
    let closed = if l.closed_at.is_some() { ", closed" } else { "" };
    format!(
        "line: {} queued; waiting list: {} parties, {} seats wanted{oldest} (served {}{closed})",
        l.in_line,
        l.waiting,
        l.seats_wanted,
        order_words(l.order)
    )
}

fn seat_request(a: SeatArgs) -> SeatRequest {
    SeatRequest {
        event: a.event,
        class: a.class,
        party: a.party,
        customer: a.customer,
        hold_seconds: None,
        seats: a.seats,
        partial: a.partial,
        together: a.together,
        wait_seconds: a.wait_seconds,
        token: a.token,
    }
}

/// Where `seatq serve` takes the customer from.
fn customer_identity(args: &ServeArgs) -> anyhow::Result<seatq_server::CustomerIdentity> {
    use seatq_server::CustomerIdentity;
    if let Some(path) = &args.customer_key_file {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let key = seatq_server::SigningKey::new(text.lines().next().unwrap_or_default().trim().as_bytes())
            .map_err(|e| Usage(format!("{}: {e}", path.display())))?;
        return Ok(CustomerIdentity::Signed(key));
    }
    Ok(match &args.customer_header {
        Some(header) => CustomerIdentity::Header(header.clone()),
        None => CustomerIdentity::Body,
    })
}

/// `seatq serve`: bind, connect, serve until SIGINT or SIGTERM.
async fn serve(ctx: &Ctx, args: ServeArgs) -> anyhow::Result<ExitCode> {
    use tokio::signal::unix::{SignalKind, signal};
    let operator_token = match &args.operator_token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            Some(text.lines().next().unwrap_or_default().trim().to_string())
        }
        None => std::env::var("SEATQ_OPERATOR_TOKEN").ok(),
    };
    let settings = seatq_server::Settings {
        api: !args.no_api,
        shop: !args.no_shop,
        dashboard: !args.no_dashboard,
        operator_token,
        protect_reads: args.protect_reads,
        request_timeout: Duration::from_secs(args.request_timeout_secs),
        limits: seatq_server::Limits {
            requests_per_address: args.rate_per_address.0,
            enqueues_per_address: args.enqueues_per_address.0,
            enqueues_per_customer: args.enqueues_per_customer.0,
            holds_per_address_and_event: args.holds_per_event.0,
            failed_signins_per_address: args.failed_signins.0,
            connections_per_address: args.connections_per_address,
        },
        trusted_proxies: args.trusted_proxy.clone(),
        client_ip_header: args.client_ip_header.clone(),
        rate_limit_exempt: args.rate_limit_exempt.clone(),
        public_origin: args.public_origin.clone(),
        allowed_hosts: args.allowed_host.clone(),
        customer_identity: customer_identity(&args)?,
        currency: args.currency.clone(),
        ..seatq_server::Settings::default()
    };
    settings.check().map_err(|e| Usage(e.to_string()))?;
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    // Bind before connecting: a taken port is a mistake to report at once.
    let listener = tokio::net::TcpListener::bind(args.addr).await.with_context(|| format!("binding {}", args.addr))?;
    let urls = seatq_server::Urls {
        database: &ctx.database_url,
        session: ctx.session_url.as_deref(),
        reads: args.read_url.as_deref(),
    };
    let client = ctx.retry.run("connecting", || seatq_server::connect(&urls, args.pool_size, ACQUIRE_TIMEOUT)).await?;
    let router = seatq_server::router(client, settings.clone(), shutdown.clone()).map_err(|e| Usage(e.to_string()))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, api = !args.no_api, shop = !args.no_shop, dashboard = !args.no_dashboard, "seatq serve: http://{addr}/");
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        tracing::info!("shutting down");
        stop.cancel();
    });
    let header_timeout = Duration::from_secs(args.header_timeout_secs);
    seatq_server::serve_with(listener, router, &settings, header_timeout, shutdown).await;
    Ok(ExitCode::SUCCESS)
}

/// Validate, enqueue (under the given idempotency key, else a random one,
/// so that retrying is safe); print the id, or with --wait the outcome.
async fn submit(ctx: &Ctx, request: Request, q: QueueArgs) -> anyhow::Result<ExitCode> {
    let key = q.key.unwrap_or_else(|| seatq::new_idempotency_key("cli"));
    let new =
        NewRequest { idempotency_key: Some(key), priority: q.priority, run_at: q.at, ..NewRequest::from(request) };
    // Refused before connecting: a malformed request needs no database.
    if let Err(e) = new.check() {
        return Ok(refused(&e, ctx.json));
    }
    let client = ctx.connect().await?;
    let id = match ctx.retry.run("enqueueing", || client.enqueue(new.clone())).await {
        Ok(id) => id,
        Err(seatq::Error::Invalid(e)) => return Ok(refused(&e, ctx.json)),
        Err(e) => return Err(e.into()),
    };
    if q.wait {
        return Ok(show(&wait(ctx, &client, id, None).await?, ctx.json));
    }
    if ctx.json {
        println!("{}", serde_json::json!({ "id": id, "idempotency_key": new.idempotency_key }));
    } else {
        println!("{id}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Wait for the outcome, retrying through lost connections; `timeout`
/// bounds the whole wait, retries included.
async fn wait(ctx: &Ctx, client: &Client, id: i64, timeout: Option<Duration>) -> anyhow::Result<RequestRecord> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    Ok(ctx.retry.run("waiting for the outcome", || client.wait(id, left())).await?)
}

/// Print a refused request (`code: message`, or JSON with `error_code` and
/// `error_message`); exit status 1.
fn refused(e: &RequestError, json: bool) -> ExitCode {
    if json {
        println!("{}", serde_json::json!({ "error_code": e.code(), "error_message": e.message }));
    } else {
        println!("{}: {}", e.code(), e.message);
    }
    ExitCode::FAILURE
}

/// Where a request that asked to wait stands: "number 4 in line", or
/// "number 2 on the waiting list (3 seats wanted ahead)".
fn place_words(r: &RequestRecord) -> String {
    match r.place {
        Some(seatq::Place { list: seatq::PlaceList::Line, parties_ahead, .. }) => {
            format!("number {} in line (due {})", parties_ahead + 1, r.run_at.to_rfc3339())
        }
        Some(seatq::Place { list: seatq::PlaceList::Waiting, parties_ahead, seats_ahead }) => format!(
            "number {} on the waiting list ({} seats wanted ahead)",
            parties_ahead + 1,
            seats_ahead.unwrap_or_default()
        ),
        None => String::new(),
    }
}

/// Print a request; exit status 1 when it failed or died.
fn show(r: &RequestRecord, json: bool) -> ExitCode {
    if json {
        println!("{}", serde_json::to_string(r).unwrap_or_default());
    } else {
        let what = match (&r.status, r.booking()) {
            (Status::Succeeded, Some(b)) => {
                let mut classes: Vec<i16> = b.seats.iter().map(|s| s.class).collect();
                classes.sort_unstable();
                classes.dedup();
                let classes: Vec<String> = classes.iter().map(i16::to_string).collect();
                let until = b.held_until.map(|t| format!(", held until {}", t.to_rfc3339())).unwrap_or_default();
                let until = if b.capped { format!("{until} (the longest a hold may last)") } else { until };
                format!(
                    "booking {} {} for {}: {} (class {}), total {}{until}",
                    b.booking,
                    b.state,
                    b.customer,
                    seatq::outcome::booked_places(&b.seats),
                    classes.join(", "),
                    money(b.total_cents)
                )
            }
            (Status::Queued | Status::Waiting, _) if r.place.is_some() => place_words(r),
            (Status::Queued, _) => format!("queued (attempts {}, run at {})", r.attempts, r.run_at.to_rfc3339()),
            _ => format!("{}: {}", r.error_code.as_deref().unwrap_or("?"), r.error_message.as_deref().unwrap_or("")),
        };
        println!("request {} ({}) {}: {what}", r.id, r.kind, r.status.as_str());
    }
    match r.status {
        Status::Failed | Status::Dead => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    }
}

/// `seatq event ...`.
async fn event(ctx: &Ctx, command: EventCommand) -> anyhow::Result<ExitCode> {
    let json = ctx.json;
    match command {
        EventCommand::Import { file, fields } => {
            let EventFields { name, venue, starts_at, sales_from, sales_until, per_customer } = fields;
            let parsed = if file == "-" {
                seatq::venue::parse_csv(std::io::stdin().lock())
            } else {
                let f = std::fs::File::open(&file).with_context(|| format!("opening {file}"))?;
                if file.to_ascii_lowercase().ends_with(".json") {
                    seatq::venue::parse_json(std::io::BufReader::new(f))
                } else {
                    seatq::venue::parse_csv(std::io::BufReader::new(f))
                }
            }
            .with_context(|| format!("reading {file}"))?;
            let mut event = parsed.event.unwrap_or_default();
            event.name = name.unwrap_or(event.name);
            event.venue = venue.or(event.venue);
            event.starts_at = starts_at.or(event.starts_at);
            event.sales_from = sales_from.or(event.sales_from);
            event.sales_until = sales_until.or(event.sales_until);
            event.per_customer = per_customer.or(event.per_customer);
            if !parsed.bad.is_empty() {
                for bad in &parsed.bad {
                    eprintln!("{file}:{}: {}: {}", bad.line, bad.code, bad.reason);
                }
                if json {
                    println!("{}", serde_json::json!({ "event": null, "bad_lines": parsed.bad }));
                } else {
                    println!("imported nothing: {} bad lines", parsed.bad.len());
                }
                return Ok(ExitCode::FAILURE);
            }
            if event.name.trim().is_empty() {
                return Err(Usage("the event needs a name: --name (or \"name\" in a JSON file)".into()).into());
            }
            event.check().map_err(seatq::Error::Invalid)?;
            let id = ctx.connect().await?.import_event(&event, &parsed.seats).await?;
            let blocked = parsed.seats.iter().filter(|s| !s.for_sale).count();
            if json {
                println!("{}", serde_json::json!({ "event": id, "seats": parsed.seats.len(), "blocked": blocked }));
            } else {
                println!("event {id} {:?}: {} seats ({blocked} not for sale)", event.name, parsed.seats.len());
            }
        }
        EventCommand::List => {
            let events = ctx.connect().await?.events(None).await?;
            if json {
                println!("{}", serde_json::to_string(&events)?);
            } else {
                for e in &events {
                    println!("{}", event_line(e));
                }
            }
        }
        EventCommand::Show { id } => {
            let client = ctx.connect().await?;
            let Some(e) = client.events(Some(id)).await?.pop() else {
                return Err(NoEvent(id).into());
            };
            let seats = client.seat_groups(id).await?;
            let list = client.waiting_list(id).await?;
            if json {
                println!("{}", serde_json::json!({ "event": e, "seats": seats, "waiting_list": list }));
            } else {
                println!("{}", event_line(&e));
                if let Some(l) = &list {
                    println!("  {}", waiting_line(l));
                }
                for g in &seats {
                    let prices = money_range(g.min_price_cents.into(), g.max_price_cents.into());
                    println!(
                        "  {:<16} class {:<3} {:<12} {:>6}  at {prices}",
                        g.section,
                        g.class,
                        g.state.as_str(),
                        g.seats
                    );
                }
            }
        }
        EventCommand::Close { id } => {
            if !ctx.connect().await?.close_event(id).await? {
                return Err(NoEvent(id).into());
            }
            if json {
                println!("{}", serde_json::json!({ "closed": id }));
            } else {
                println!("event {id}: sales closed");
            }
        }
        EventCommand::CloseList { id } => {
            if !ctx.connect().await?.close_waiting_list(id).await? {
                return Err(NoEvent(id).into());
            }
            if json {
                println!("{}", serde_json::json!({ "waiting_list_closed": id }));
            } else {
                println!("event {id}: waiting list closed");
            }
        }
        EventCommand::ListOrder { id, order } => {
            if !ctx.connect().await?.set_waitlist_order(id, order).await? {
                return Err(NoEvent(id).into());
            }
            if json {
                println!("{}", serde_json::json!({ "event": id, "waitlist_order": order }));
            } else {
                println!("event {id}: waiting list served {}", order_words(order));
            }
        }
        EventCommand::Edit { id, fields } => {
            let changes = seatq::EventChanges::from(fields);
            if changes.is_empty() {
                return Err(Usage(
                    "nothing to change: give --name, --venue, --starts-at, --sales-from, --sales-until or --per-customer"
                        .into(),
                )
                .into());
            }
            let client = ctx.connect().await?;
            if !client.edit_event(id, &changes).await? {
                return Err(NoEvent(id).into());
            }
            let Some(e) = client.events(Some(id)).await?.pop() else {
                return Err(NoEvent(id).into());
            };
            if json {
                println!("{}", serde_json::json!({ "event": e }));
            } else {
                println!("{}", event_line(&e));
            }
        }
        EventCommand::Delete { id } => {
            if !ctx.connect().await?.delete_event(id).await? {
                return Err(NoEvent(id).into());
            }
            if json {
                println!("{}", serde_json::json!({ "deleted": id }));
            } else {
                println!("event {id}: deleted");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One event, as `seatq event list` prints it.
fn event_line(e: &seatq::EventSummary) -> String {
    let time = |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339()).unwrap_or_else(|| "-".into());
    let venue = e.venue.as_deref().map(|v| format!(" at {v}")).unwrap_or_default();
    let sales = e.refusal.as_deref().unwrap_or("on_sale");
    let limit = e.per_customer.map(|n| format!(", at most {n} per customer")).unwrap_or_default();
    format!(
        "{} {:?}{venue}, starts {}: {sales} (from {} until {}{limit}); {} seats: {} free, {} taken, {} not for sale",
        e.id,
        e.name,
        time(e.starts_at),
        time(e.sales_from),
        time(e.sales_until),
        e.seats,
        e.free,
        e.taken,
        e.blocked
    )
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::Cli;

    #[test]
    fn every_command_and_argument_explains_itself() {
        seatq_core::bin::assert_documented(Cli::command());
    }

    #[test]
    fn ranged_arguments_show_their_range() {
        let mut cli = Cli::command();
        cli.build();
        let hold = cli.find_subcommand("hold").expect("hold");
        for (arg, range) in [("party", "1-9"), ("class", "1-32767"), ("hold_seconds", "1-86400")] {
            let arg = hold.get_arguments().find(|a| a.get_id() == arg).expect(arg);
            assert_eq!(arg.get_value_names().unwrap_or_default(), [range]);
        }
        let extend = cli.find_subcommand("extend").expect("extend");
        let arg = extend.get_arguments().find(|a| a.get_id() == "hold_seconds").expect("hold_seconds");
        assert_eq!(arg.get_value_names().unwrap_or_default(), ["1-86400"]);
    }
}
