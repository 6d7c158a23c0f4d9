//! `seatq`: enqueue booking requests, read outcomes, inspect the queue.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args as ClapArgs, Parser, Subcommand};
use seatq::client::Retry;
use seatq::{BookingRef, Client, NewRequest, Request, RequestError, RequestRecord, SeatRequest, Status};
use serde_json::Value;
use tokio::time::Instant;

/// How long one wait for a connection (connecting included) may take before
/// it counts as a failed attempt and is retried.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Most hours `prune --older-than-hours` takes (over a century): hours × 3600
/// must not overflow, or a huge value would wrap to a tiny age and prune
/// recent requests.
const MAX_HOURS: u64 = 1_000_000;

/// seatq: a seat-booking queue in PostgreSQL.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    /// PostgreSQL URL; the database is created and migrated if missing.
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true, default_value = seatq::db::DEFAULT_DATABASE_URL)]
    database_url: String,
    /// Print JSON instead of text.
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
        #[arg(long, default_value_t = 10)]
        flights: i32,
        #[arg(long, default_value_t = 250)]
        seats: i32,
    },
    /// Hold seats for a while (confirm or cancel later).
    Hold {
        #[command(flatten)]
        seats: SeatArgs,
        /// Hold time in seconds (default 600).
        #[arg(long)]
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
    /// Enqueue requests from a JSON-lines file: {"kind", "payload", "idempotency_key"?, "priority"?} per line.
    /// Bad lines are reported (file:line: code: reason) and the good ones enqueued, all in one transaction;
    /// exits 1 if any line was bad.
    Enqueue {
        /// The file ("-" for standard input).
        #[arg(long)]
        file: String,
        /// Enqueue nothing if any line is bad.
        #[arg(long)]
        strict: bool,
    },
    /// Show a request.
    Status { id: i64 },
    /// Wait for a request's outcome and show it.
    Wait {
        id: i64,
        /// Give up after this many seconds.
        #[arg(long)]
        timeout: Option<u64>,
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
        /// Age in hours (at most 1000000).
        #[arg(long, default_value_t = 7 * 24, value_parser = clap::value_parser!(u64).range(0..=MAX_HOURS))]
        older_than_hours: u64,
    },
}

#[derive(Debug, ClapArgs)]
struct SeatArgs {
    #[arg(long)]
    event: i64,
    /// Seat class (required unless --seats names the seats).
    #[arg(long)]
    class: Option<i16>,
    /// Party size (defaults to the number of --seats).
    #[arg(long)]
    party: Option<u32>,
    #[arg(long)]
    customer: String,
    /// Exact seat numbers, comma-separated: all of them or none.
    #[arg(long, value_delimiter = ',')]
    seats: Vec<i32>,
    /// Take what is left if fewer seats remain.
    #[arg(long)]
    partial: bool,
    /// Seat the party side by side in one row.
    #[arg(long)]
    together: bool,
}

#[derive(Debug, ClapArgs)]
struct BookingArgs {
    #[arg(long)]
    booking: i64,
    #[arg(long)]
    customer: String,
}

#[derive(Debug, ClapArgs)]
struct QueueArgs {
    /// Idempotency key: enqueueing again with the same key returns the first request instead of
    /// booking twice (default: a random key, so that this command's own retries are safe).
    #[arg(long)]
    key: Option<String>,
    /// Higher runs first.
    #[arg(long, default_value_t = 0)]
    priority: i16,
    /// Block until the outcome is known and print it.
    #[arg(long)]
    wait: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    seatq_core::init_tracing(false, "warn");
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::from(2)
        }
    }
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
    json: bool,
    retry: Retry,
}

impl Ctx {
    /// Connect (creating the database and applying migrations if needed),
    /// retrying while the server cannot be reached.
    async fn connect(&self) -> anyhow::Result<Client> {
        let url = &self.database_url;
        Ok(self.retry.run("connecting", || Client::connect_with_timeout(url, ACQUIRE_TIMEOUT)).await?)
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let ctx = Ctx {
        database_url: cli.database_url,
        json: cli.json,
        retry: Retry::within(Duration::from_secs(cli.retry_secs)),
    };
    let json = ctx.json;
    match cli.command {
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
        Command::Hold { seats, hold_seconds, queue } => {
            let mut r = seat_request(seats);
            r.hold_seconds = hold_seconds;
            return submit(&ctx, Request::Hold(r), queue).await;
        }
        Command::Book { seats, queue } => {
            return submit(&ctx, Request::Book(seat_request(seats)), queue).await;
        }
        Command::Confirm { booking, queue } => {
            let r = BookingRef { booking: booking.booking, customer: booking.customer };
            return submit(&ctx, Request::Confirm(r), queue).await;
        }
        Command::Cancel { booking, queue } => {
            let r = BookingRef { booking: booking.booking, customer: booking.customer };
            return submit(&ctx, Request::Cancel(r), queue).await;
        }
        Command::Enqueue { file, strict } => {
            return enqueue_file(&ctx, &file, strict).await;
        }
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
        Command::Retry { id, all_dead } => {
            let ids = ctx.connect().await?.retry_dead(if all_dead { None } else { id }).await?;
            if json {
                println!("{}", serde_json::json!({ "requeued": ids }));
            } else {
                println!("requeued {} dead request(s): {ids:?}", ids.len());
            }
            if ids.is_empty() && !all_dead {
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
    }
}

/// Validate, enqueue (under the given idempotency key, else a random one,
/// so that retrying is safe); print the id, or with --wait the outcome.
async fn submit(ctx: &Ctx, request: Request, q: QueueArgs) -> anyhow::Result<ExitCode> {
    let key = q.key.unwrap_or_else(|| seatq::client::new_idempotency_key("cli"));
    let new = NewRequest { request, idempotency_key: Some(key), priority: q.priority };
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

/// Print a request; exit status 1 when it failed or died.
fn show(r: &RequestRecord, json: bool) -> ExitCode {
    if json {
        println!("{}", serde_json::to_string(r).unwrap_or_default());
    } else {
        let what = match (&r.status, r.booking()) {
            (Status::Succeeded, Some(b)) => {
                let seats: Vec<String> = b.seats.iter().map(|s| format!("{}(class {})", s.seat, s.class)).collect();
                let until = b.held_until.map(|t| format!(", held until {}", t.to_rfc3339())).unwrap_or_default();
                format!(
                    "booking {} {} for {}: seats {} total {}.{:02}{until}",
                    b.booking,
                    b.state,
                    b.customer,
                    seats.join(" "),
                    b.total_cents / 100,
                    b.total_cents % 100
                )
            }
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

/// Validate every line first, then enqueue the good ones (none with
/// `strict` if any is bad) in one transaction; report each bad line with its
/// number and reason.
async fn enqueue_file(ctx: &Ctx, file: &str, strict: bool) -> anyhow::Result<ExitCode> {
    let parsed = if file == "-" {
        seatq::bulk::parse(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("opening {file}"))?;
        seatq::bulk::parse(std::io::BufReader::new(f))
    }
    .with_context(|| format!("reading {file}"))?;
    for bad in &parsed.bad {
        eprintln!("{file}:{}: {}: {}", bad.line, bad.code, bad.reason);
    }
    let refused = strict && !parsed.bad.is_empty();
    let ids = if refused || parsed.good.is_empty() {
        Vec::new()
    } else {
        ctx.connect().await?.enqueue_all(&parsed.good, &ctx.retry).await?
    };
    if ctx.json {
        let bad: Vec<Value> = parsed
            .bad
            .iter()
            .map(|b| serde_json::json!({"line": b.line, "code": b.code, "reason": b.reason}))
            .collect();
        println!("{}", serde_json::json!({ "enqueued": ids, "bad_lines": bad }));
    } else if refused {
        println!("enqueued nothing: {} bad lines (--strict)", parsed.bad.len());
    } else {
        println!("enqueued {} requests ({} bad lines skipped)", ids.len(), parsed.bad.len());
    }
    Ok(if parsed.bad.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
