//! `seatq enqueue --file` and `seatq batch ...`: a file of parties in, each
//! party's outcome out, a progress bar while waiting, a summary at the end;
//! a batch read back by name. docs/group-bookings.md is the guide.

use std::io::{IsTerminal as _, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use futures_util::StreamExt as _;
use indicatif::{HumanDuration, ProgressBar, ProgressState, ProgressStyle};
use seatq::bulk::Format;
use seatq::{Batch, BatchStatus, OutcomeWriter, PartyOutcome, PartyStatus, Summary};
use tokio::time::Instant;

use crate::{Ctx, Usage};

/// The form of a file, on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum FileFormat {
    /// One JSON object a line.
    Jsonl,
    /// A header naming the columns, then one line each.
    Csv,
}

impl From<FileFormat> for Format {
    fn from(f: FileFormat) -> Format {
        match f {
            FileFormat::Jsonl => Format::Jsonl,
            FileFormat::Csv => Format::Csv,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct EnqueueArgs {
    /// The file ("-" for standard input, which needs --batch).
    #[arg(long)]
    file: String,
    /// The batch's name, from which each line's idempotency key derives (with its ref, or its content) [default:
    /// the file's name without directory and extension].
    #[arg(long, value_name = "NAME")]
    batch: Option<String>,
    /// The file's form [default: by its extension: .csv is CSV, anything else JSON lines].
    #[arg(long, value_name = "FORMAT")]
    format: Option<FileFormat>,
    /// Enqueue nothing if any line is bad.
    #[arg(long)]
    strict: bool,
    /// Wait for every party's outcome, with a progress bar on a terminal, and print a summary; exits 1 if any
    /// party failed.
    #[arg(long)]
    wait: bool,
    /// Give up waiting after this many seconds (exit status 2; the outcomes so far are still written)
    /// [default: wait as long as it takes].
    #[arg(long, value_name = "SECS", requires = "wait")]
    timeout: Option<u64>,
    /// Write each line's outcome to this file ("-" for standard output), one line per line of the input, in
    /// its order: ref, request id, status, and the booking or the error.
    #[arg(long, value_name = "FILE", requires = "wait")]
    out: Option<String>,
    /// The outcome file's form [default: by its extension, else the input's].
    #[arg(long, value_name = "FORMAT", requires = "out")]
    out_format: Option<FileFormat>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BatchCommand {
    /// A batch's requests counted by status and outcome, in all and by event and class; exits 1 if there is
    /// no such batch.
    Status {
        /// The batch's name (as `enqueue --batch` gave it, or the file's name).
        name: String,
    },
    /// Every request of a batch as an outcome line, in the order of the lines they came from; exits 1 if
    /// there is no such batch.
    Results {
        /// The batch's name (as `enqueue --batch` gave it, or the file's name).
        name: String,
        /// The file to write ("-" for standard output).
        #[arg(long, value_name = "FILE", default_value = "-")]
        out: String,
        /// Its form [default: by its extension, else JSON lines].
        #[arg(long, value_name = "FORMAT")]
        format: Option<FileFormat>,
    },
}

/// Read and check the file, enqueue its parties as a batch (only those not
/// enqueued before); with --wait, follow their outcomes and write them.
pub(crate) async fn enqueue_file(ctx: &Ctx, args: EnqueueArgs) -> anyhow::Result<ExitCode> {
    let file = args.file.as_str();
    let name = match args.batch.clone().or_else(|| seatq::batch::default_name(file)) {
        Some(name) => name,
        None if file == "-" => {
            return Err(Usage("reading standard input: name the batch with --batch NAME".into()).into());
        }
        None => {
            return Err(Usage(format!("{file:?} gives no batch name: name the batch with --batch NAME")).into());
        }
    };
    seatq::new_request::check_name(&name).map_err(|e| Usage(format!("--batch {name:?}: {}", e.message)))?;
    let format = args.format.map(Format::from).or_else(|| Format::of_path(file)).unwrap_or(Format::Jsonl);
    let parsed = if file == "-" {
        format.parse(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("opening {file}"))?;
        format.parse(std::io::BufReader::new(f))
    }
    .with_context(|| format!("reading {file}"))?;
    let mut batch = Batch::from_file(&name, parsed).map_err(|e| Usage(e.message))?;
    let client = if batch.parties().is_empty() {
        None
    } else {
        // A line reusing a key for another request is a bad line too (found
        // under --strict as well, so that one run names every bad line).
        let client = ctx.connect().await?;
        let mut backoff = ctx.retry.backoff();
        loop {
            match client.check_batch(&mut batch).await {
                Ok(()) => break,
                Err(e) if backoff.pause("checking idempotency keys", &e).await => {}
                Err(e) => return Err(e.into()),
            }
        }
        Some(client)
    };
    for bad in batch.bad() {
        eprintln!("{file}:{}: {}: {}", bad.line, bad.code, bad.reason);
    }
    // The report goes where the outcomes do not.
    let to_stdout = args.out.as_deref() != Some("-");
    let report = |text: &str| if to_stdout { println!("{text}") } else { eprintln!("{text}") };
    let refused = args.strict && !batch.bad().is_empty();
    let submitted = match client.as_ref() {
        Some(client) if !refused => client.enqueue_batch(&batch, &ctx.retry).await?,
        _ => seatq::batch::Submitted::default(),
    };
    let mut doc = serde_json::json!({
        "batch": name,
        "enqueued": submitted.ids,
        "new": submitted.enqueued,
        "bad_lines": batch.bad(),
    });
    if !ctx.json {
        if refused {
            let bad = batch.bad().len();
            report(&format!("enqueued nothing: {bad} bad {} (--strict)", plural(bad, "line", "lines")));
        } else {
            let parties = submitted.ids.len();
            let bad = batch.bad().len();
            report(&format!(
                "batch {name:?}: {parties} {}: {} enqueued, {} already submitted; {bad} bad {} skipped",
                plural(parties, "party", "parties"),
                submitted.enqueued,
                parties - submitted.enqueued,
                plural(bad, "line", "lines"),
            ));
        }
    }
    let mut failed = !batch.bad().is_empty();
    let mut timed_out = None;
    let out_format = |out: &str| args.out_format.map(Format::from).or_else(|| Format::of_path(out)).unwrap_or(format);
    if args.wait && refused {
        // Nothing enqueued, yet every line has its outcome: the bad ones
        // with their errors, the good ones as not submitted.
        if let Some(out) = &args.out {
            let bad = batch.bad().len();
            let why = format!("not enqueued (--strict): the file has {bad} bad {}", plural(bad, "line", "lines"));
            let mut outcomes: Vec<PartyOutcome> = batch.not_submitted(&why).chain(batch.refused()).collect();
            outcomes.sort_by_key(|o| o.line);
            write_outcomes(out, out_format(out), &outcomes)?;
            if !ctx.json && out != "-" {
                report(&format!("outcomes written to {out}"));
            }
        }
    } else if args.wait {
        let deadline = args.timeout.map(|t| Instant::now() + Duration::from_secs(t));
        let (outcomes, unfinished) = match client.as_ref() {
            Some(client) => follow(client, &batch, &submitted, deadline).await?,
            // Every line bad: their outcomes are all known.
            None => (batch.refused().collect(), None),
        };
        let mut summary = Summary::default();
        outcomes.iter().for_each(|o| summary.add(o));
        failed |= summary.any_failed();
        if let Some(out) = &args.out {
            write_outcomes(out, out_format(out), &outcomes)?;
        }
        if ctx.json {
            doc["summary"] = serde_json::to_value(&summary)?;
        } else {
            report(&summary_text(&name, &summary));
            if let Some(out) = args.out.as_deref().filter(|o| *o != "-") {
                report(&format!("outcomes written to {out}"));
            }
        }
        timed_out = unfinished;
    }
    let timeout = timed_out.map(|unfinished| {
        let n = unfinished.len();
        let first = seatq::Error::Timeout(unfinished.first().copied().unwrap_or_default());
        anyhow::Error::new(first)
            .context(format!("batch {name:?}: {n} {} without an outcome", plural(n, "party", "parties")))
    });
    if ctx.json {
        // One document, with the timeout in it (exit status 2 all the same).
        if let Some(e) = &timeout {
            doc["error"] = serde_json::json!({ "code": crate::error_code(e), "message": crate::error_text(e) });
        }
        report(&doc.to_string());
    }
    match timeout {
        Some(_) if ctx.json => Ok(ExitCode::from(2)),
        Some(e) => Err(e),
        None => Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }),
    }
}

/// Follow the parties' outcomes until all are known or `deadline` passes,
/// with a progress bar on standard error when it is a terminal. Returns
/// every line's outcome (parties and refused lines, in line order) and, if
/// the deadline passed, the ids of the parties still queued.
async fn follow(
    client: &seatq::Client,
    batch: &Batch,
    submitted: &seatq::batch::Submitted,
    deadline: Option<Instant>,
) -> anyhow::Result<(Vec<PartyOutcome>, Option<Vec<i64>>)> {
    let mut outcomes: Vec<PartyOutcome> = batch.pending(submitted).chain(batch.refused()).collect();
    outcomes.sort_by_key(|o| o.line);
    let place: std::collections::HashMap<usize, usize> =
        outcomes.iter().enumerate().filter_map(|(i, o)| o.line.map(|l| (l, i))).collect();
    let bar = progress_bar(batch.parties().len() as u64);
    let (mut seats, mut failures) = (0, 0);
    let mut stream = client.batch_outcomes(batch, submitted);
    let mut timed_out = false;
    loop {
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, stream.next()).await {
                Ok(next) => next,
                Err(_) => {
                    timed_out = true;
                    break;
                }
            },
            None => stream.next().await,
        };
        let Some(outcome) = next else { break };
        let outcome = outcome?;
        seats += outcome.seats();
        failures += usize::from(outcome.is_failure());
        bar.set_message(format!("{seats} seats booked, {failures} failed"));
        bar.inc(1);
        if let Some(i) = outcome.line.and_then(|l| place.get(&l)) {
            outcomes[*i] = outcome;
        }
    }
    bar.finish_and_clear();
    let unfinished = timed_out
        .then(|| outcomes.iter().filter(|o| o.status == PartyStatus::Queued).filter_map(|o| o.id).collect::<Vec<_>>());
    Ok((outcomes, unfinished))
}

/// Parties done of `total`, seats booked, failures, rate and time left, on
/// standard error when it is a terminal; nothing otherwise.
fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    styled(ProgressBar::new(total))
}

/// `bar` with the look of [`progress_bar`].
fn styled(bar: ProgressBar) -> ProgressBar {
    // The bar takes what the text leaves of the terminal's width.
    let template = "{wide_bar} {pos}/{len} parties | {msg} | {rate} | {left}";
    if let Ok(style) = ProgressStyle::with_template(template) {
        let rate = |state: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.0}/s", state.per_sec());
        };
        // Until a party has finished there is nothing to estimate from:
        // indicatif's own estimate ({eta}) is then "0s", which reads as
        // done while nothing moves.
        let left = |state: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = match state.pos() {
                0 => w.write_str("estimating time left"),
                _ => write!(w, "{:#} left", HumanDuration(state.eta())),
            };
        };
        bar.set_style(style.progress_chars("=> ").with_key("rate", rate).with_key("left", left));
    }
    bar.set_message("0 seats booked, 0 failed");
    bar
}

/// Write every outcome to `out` (see [`OutFile`]).
fn write_outcomes(out: &str, format: Format, outcomes: &[PartyOutcome]) -> anyhow::Result<()> {
    let mut file = OutFile::create(out, format)?;
    for o in outcomes {
        file.write(o)?;
    }
    file.finish()
}

/// An outcome file being written: standard output (`-`), or a file
/// written beside its name (`NAME.partial`) and renamed into place once
/// complete, so that an interrupted run leaves no half-written file under
/// the name.
struct OutFile {
    out: OutcomeWriter<Box<dyn Write>>,
    /// The file's name and the one it is written under, unless standard output.
    names: Option<(String, String)>,
}

impl OutFile {
    fn create(path: &str, format: Format) -> anyhow::Result<OutFile> {
        let (sink, names): (Box<dyn Write>, _) = if path == "-" {
            (Box::new(std::io::stdout().lock()), None)
        } else {
            let partial = format!("{path}.partial");
            let file = std::fs::File::create(&partial).with_context(|| format!("creating {partial}"))?;
            (Box::new(std::io::BufWriter::new(file)), Some((path.to_string(), partial)))
        };
        Ok(OutFile { out: OutcomeWriter::new(format, sink).context("writing the outcomes")?, names })
    }

    fn write(&mut self, outcome: &PartyOutcome) -> anyhow::Result<()> {
        self.out.write(outcome).context("writing the outcomes")
    }

    fn finish(self) -> anyhow::Result<()> {
        self.out.finish().context("writing the outcomes")?;
        if let Some((path, partial)) = self.names {
            std::fs::rename(&partial, &path).with_context(|| format!("renaming {partial} to {path}"))?;
        }
        Ok(())
    }
}

/// `seatq batch ...`.
pub(crate) async fn batch(ctx: &Ctx, command: BatchCommand) -> anyhow::Result<ExitCode> {
    match command {
        BatchCommand::Status { name } => {
            let client = ctx.connect().await?;
            let status = ctx.retry.run("reading the batch", || client.batch_status(&name)).await?;
            if ctx.json {
                println!("{}", serde_json::to_string(&status)?);
            } else {
                println!("{}", status_text(&status));
            }
            Ok(if status.first_enqueued.is_none() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        BatchCommand::Results { name, out, format } => {
            let format = format.map(Format::from).or_else(|| Format::of_path(&out)).unwrap_or(Format::Jsonl);
            let client = ctx.connect().await?;
            let mut rows = client.batch_results(&name);
            let Some(first) = rows.next().await.transpose()? else {
                eprintln!("batch {name:?} has no requests");
                return Ok(ExitCode::FAILURE);
            };
            // Written as read: a batch is never all in memory.
            let mut file = OutFile::create(&out, format)?;
            file.write(&first)?;
            let mut n = 1;
            while let Some(outcome) = rows.next().await {
                file.write(&outcome?)?;
                n += 1;
            }
            file.finish()?;
            if out != "-" {
                if ctx.json {
                    println!("{}", serde_json::json!({ "batch": name, "outcomes": n, "out": out }));
                } else {
                    println!("{n} outcomes of batch {name:?} written to {out}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A batch as `seatq batch status` shows it.
fn status_text(status: &BatchStatus) -> String {
    let Some(first) = status.first_enqueued else {
        return format!("batch {:?} has no requests", status.name);
    };
    let last = match status.last_finished {
        Some(t) if status.summary.total.queued == 0 => format!(", all finished by {}", t.to_rfc3339()),
        Some(t) => format!(", the last finished at {}", t.to_rfc3339()),
        None => String::new(),
    };
    let mut text = format!("first enqueued at {}{last}\n", first.to_rfc3339());
    text.push_str(&summary_text(&status.name, &status.summary));
    let statuses: Vec<String> = status.summary.statuses.iter().map(|(s, n)| format!("{s} {n}")).collect();
    text.push_str(&format!("\n  by status: {}", statuses.join(", ")));
    text
}

/// A summary: the totals on one line, then a line per event and class, then
/// the failures by error code.
fn summary_text(name: &str, s: &Summary) -> String {
    let t = &s.total;
    let mut text = format!(
        "batch {name:?}: {} {}: {} booked ({} {}), {} sold out, {} other failures, {} queued",
        t.parties,
        plural(t.parties as usize, "party", "parties"),
        t.booked,
        t.seats,
        plural(t.seats as usize, "seat", "seats"),
        t.sold_out,
        t.failed,
        t.queued
    );
    if s.refused > 0 {
        text.push_str(&format!("; {} {} refused", s.refused, plural(s.refused as usize, "line", "lines")));
    }
    if !s.groups.is_empty() {
        text.push_str(&format!(
            "\n  {:>6} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "event", "class", "parties", "booked", "seats", "sold_out", "failed", "queued"
        ));
    }
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for g in &s.groups {
        let c = &g.counts;
        text.push_str(&format!(
            "\n  {:>6} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
            or_dash(g.event.map(|e| e.to_string())),
            or_dash(g.class.map(|c| c.to_string())),
            c.parties,
            c.booked,
            c.seats,
            c.sold_out,
            c.failed,
            c.queued
        ));
    }
    if !s.errors.is_empty() {
        let errors: Vec<String> = s.errors.iter().map(|(code, n)| format!("{code} {n}")).collect();
        text.push_str(&format!("\n  failures by error code: {}", errors.join(", ")));
    }
    text
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use indicatif::{ProgressDrawTarget, TermLike};

    use super::*;

    /// A terminal that keeps the line last drawn on it.
    #[derive(Debug, Default, Clone)]
    struct Screen(Arc<Mutex<String>>);

    impl Screen {
        fn line(&self) -> String {
            self.0.lock().map(|l| l.clone()).unwrap_or_default()
        }

        fn edit(&self, f: impl FnOnce(&mut String)) -> std::io::Result<()> {
            if let Ok(mut line) = self.0.lock() {
                f(&mut line);
            }
            Ok(())
        }
    }

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            160
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.edit(|line| *line = s.to_string())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.edit(|line| line.push_str(s))
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.edit(String::clear)
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_progress_bar_estimates_no_time_left_until_a_party_has_finished() {
        let screen = Screen::default();
        let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
        let bar = styled(ProgressBar::with_draw_target(Some(9), target));
        bar.force_draw();
        let line = screen.line();
        assert!(line.contains("0/9 parties | 0 seats booked, 0 failed | 0/s | estimating time left"), "{line:?}");
        assert!(!line.contains("0s left"), "{line:?}");
        bar.inc(1);
        bar.force_draw();
        let line = screen.line();
        assert!(line.contains("1/9 parties") && line.ends_with(" left") && !line.contains("estimating"), "{line:?}");
    }
}
