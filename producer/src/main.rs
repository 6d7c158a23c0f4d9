//! `seatq`: enqueue booking requests, read outcomes, inspect the queue.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args as ClapArgs, Parser, Subcommand};
use seatq::{BookingRef, Client, NewRequest, Request, RequestRecord, SeatRequest, Status};
use serde_json::Value;

/// seatq: a seat-booking queue in PostgreSQL.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    /// PostgreSQL URL; the database is created and migrated if missing.
    #[arg(long, global = true, env = "DATABASE_URL", default_value = seatq::db::DEFAULT_DATABASE_URL)]
    database_url: String,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
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
    /// Bad lines are reported (line number and reason) and the good ones enqueued; exits 1 if any line was bad.
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
    /// Delete finished requests older than the given age now (workers also do this hourly by default).
    Prune {
        /// Age in hours.
        #[arg(long, default_value_t = 7 * 24)]
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
    /// Makes a retry safe: the same key returns the first request.
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
    seatq::init_tracing(false, "warn");
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let client = Client::connect(&cli.database_url).await?;
    let json = cli.json;
    match cli.command {
        Command::Migrate => println!("migrations applied"),
        Command::Seed { flights, seats } => {
            let ids = client.seed(flights, seats).await?;
            if json {
                println!("{}", serde_json::json!({ "events": ids }));
            } else {
                println!("{} events of {seats} seats: ids {:?}", ids.len(), ids);
            }
        }
        Command::Hold { seats, hold_seconds, queue } => {
            let mut r = seat_request(seats);
            r.hold_seconds = hold_seconds;
            return submit(&client, Request::Hold(r), queue, json).await;
        }
        Command::Book { seats, queue } => {
            return submit(&client, Request::Book(seat_request(seats)), queue, json).await;
        }
        Command::Confirm { booking, queue } => {
            let r = BookingRef { booking: booking.booking, customer: booking.customer };
            return submit(&client, Request::Confirm(r), queue, json).await;
        }
        Command::Cancel { booking, queue } => {
            let r = BookingRef { booking: booking.booking, customer: booking.customer };
            return submit(&client, Request::Cancel(r), queue, json).await;
        }
        Command::Enqueue { file, strict } => {
            return enqueue_file(&client, &file, strict, json).await;
        }
        Command::Status { id } => return Ok(show(&client.status(id).await?, json)),
        Command::Wait { id, timeout } => {
            return Ok(show(&client.wait(id, timeout.map(Duration::from_secs)).await?, json));
        }
        Command::Stats => {
            let stats = client.stats().await?;
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
            let workers = client.workers().await?;
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
            let ids = client.retry_dead(if all_dead { None } else { id }).await?;
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
            let n = client.prune(Duration::from_secs(older_than_hours * 3600)).await?;
            if json {
                println!("{}", serde_json::json!({ "pruned": n }));
            } else {
                println!("pruned {n} finished request(s)");
            }
        }
        Command::Check => {
            let violations = client.check_invariants(false).await?;
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

/// Enqueue; print the id, or with --wait the outcome.
async fn submit(client: &Client, request: Request, q: QueueArgs, json: bool) -> anyhow::Result<ExitCode> {
    let id = client.enqueue(NewRequest { request, idempotency_key: q.key, priority: q.priority }).await?;
    if q.wait {
        return Ok(show(&client.wait(id, None).await?, json));
    }
    if json {
        println!("{}", serde_json::json!({ "id": id }));
    } else {
        println!("{id}");
    }
    Ok(ExitCode::SUCCESS)
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
/// `strict` if any is bad); report each bad line with its number and reason.
async fn enqueue_file(client: &Client, file: &str, strict: bool, json: bool) -> anyhow::Result<ExitCode> {
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
    let mut ids = Vec::with_capacity(parsed.good.len());
    if !(strict && !parsed.bad.is_empty()) {
        for chunk in parsed.good.chunks(1000) {
            ids.extend(client.enqueue_many(chunk).await?);
        }
    }
    if json {
        let bad: Vec<Value> = parsed
            .bad
            .iter()
            .map(|b| serde_json::json!({"line": b.line, "code": b.code, "reason": b.reason}))
            .collect();
        println!("{}", serde_json::json!({ "enqueued": ids, "bad_lines": bad }));
    } else if strict && !parsed.bad.is_empty() {
        println!("enqueued nothing: {} bad lines (--strict)", parsed.bad.len());
    } else {
        println!("enqueued {} requests ({} bad lines skipped)", ids.len(), parsed.bad.len());
    }
    Ok(if parsed.bad.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
