//! A box office's large cases, end to end through the `seatq` command line:
//! a stadium of 100,000 seats imported from a venue file, a file of 50,000
//! parties booked into it with the outcome file written, the availability
//! and the checkout page of the whole stadium; the invariant check last.
//! The times are printed (run with `--nocapture`), never asserted;
//! docs/operations.md gives them.

mod common;

use std::process::Command;
use std::time::Instant;

use common::http::Served;
use common::{Running, TestDb, seatq_bin};
use seatq_worker::Config;

const SECTIONS: usize = 10;
const ROWS: usize = 100;
const PER_ROW: usize = 100;
const PARTIES: usize = 50_000;

/// Run `seatq` with `args` against `db`; its exit status and standard output.
fn seatq(db: &TestDb, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(seatq_bin()).arg("--database-url").arg(db.url()).args(args).output().expect("run seatq");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stadium_of_100000_seats_and_a_file_of_50000_parties() {
    let db = TestDb::new().await;
    let dir = std::env::temp_dir().join(format!("seatq-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");

    // Ten stands of a hundred rows of a hundred seats; a class per two stands.
    let mut venue = String::from("section,row,seat,pos,class,price,for_sale\n");
    for section in 1..=SECTIONS {
        for row in 1..=ROWS {
            for seat in 1..=PER_ROW {
                let class = section.div_ceil(2);
                venue.push_str(&format!("Stand {section},{row},{seat},{seat},{class},{}.50,yes\n", 10 * class));
            }
        }
    }
    let venue_file = dir.join("stadium.csv");
    std::fs::write(&venue_file, venue).expect("write the venue");
    let started = Instant::now();
    let (code, out) =
        seatq(&db, &["--json", "event", "import", "--file", venue_file.to_str().unwrap(), "--name", "Stadium"]);
    let import_secs = started.elapsed().as_secs_f64();
    assert_eq!(code, Some(0), "{out}");
    let imported: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    assert_eq!(imported["seats"], SECTIONS * ROWS * PER_ROW);
    let ev = imported["event"].as_i64().expect("event id");

    // 50,000 parties of 1 to 9 (about 250,000 seats wanted of 100,000).
    let mut rng = fastrand::Rng::with_seed(50_000);
    let mut parties = String::from("ref,kind,event,class,party,together,customer\n");
    for n in 1..=PARTIES {
        let (class, party) = (rng.usize(1..=5), rng.usize(1..=9));
        let together = if rng.u8(..) < 64 { "yes" } else { "" };
        parties.push_str(&format!("P{n},book,{ev},{class},{party},{together},customer {}\n", n % 7919));
    }
    let parties_file = dir.join("parties.csv");
    let outcomes_file = dir.join("outcomes.csv");
    std::fs::write(&parties_file, parties).expect("write the parties");
    let workers = Running::start(&db, 2, Config::default()).await;
    let started = Instant::now();
    let (code, _) = seatq(
        &db,
        &["enqueue", "--file", parties_file.to_str().unwrap(), "--wait", "--out", outcomes_file.to_str().unwrap()],
    );
    let parties_secs = started.elapsed().as_secs_f64();
    assert_eq!(code, Some(1), "some parties fail (sold out): exit status 1");

    // One outcome line per party, in the file's order; their seats are the database's.
    let mut reader = csv::Reader::from_path(&outcomes_file).expect("the outcome file");
    let headers = reader.headers().expect("header").clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    let (line, status, seats) = (column("line"), column("status"), column("seats"));
    let mut lines = 0;
    let mut booked_seats = 0;
    let mut succeeded = 0;
    for (k, record) in reader.records().enumerate() {
        let record = record.expect("an outcome line");
        assert_eq!(record[line].parse::<usize>().ok(), Some(k + 2), "outcome lines in the file's order");
        if &record[status] == "succeeded" {
            succeeded += 1;
            booked_seats += record[seats].split(' ').count() as i64;
        }
        lines += 1;
    }
    assert_eq!(lines, PARTIES);
    assert_eq!(db.seats_taken(ev).await, booked_seats, "the outcome file's seats are the database's");
    assert!(succeeded > 10_000, "the stadium sold: {succeeded} parties");

    // What a storefront reads: availability and the whole map, then the page.
    let started = Instant::now();
    let view = db.client.cached_availability(ev).await.expect("availability");
    let free: i64 = view.classes().iter().map(|c| c.free).sum();
    let map = view.seat_map();
    let view_ms = started.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(free, (SECTIONS * ROWS * PER_ROW) as i64 - booked_seats);
    assert_eq!(map.len(), SECTIONS * ROWS * PER_ROW);
    let served = Served::start(&db, seatq_server::Settings::default()).await;
    let started = Instant::now();
    let page = reqwest::get(served.url(&format!("/shop/{ev}"))).await.expect("the checkout page");
    assert_eq!(page.status().as_u16(), 200);
    let bytes = page.bytes().await.expect("the page").len();
    let page_ms = started.elapsed().as_secs_f64() * 1000.0;

    println!(
        "100,000-seat venue imported in {import_secs:.1} s; {PARTIES} parties booked and their outcomes written in \
         {parties_secs:.1} s ({succeeded} succeeded, {booked_seats} seats); availability and map read in \
         {view_ms:.0} ms; checkout page {} kB in {page_ms:.0} ms",
        bytes / 1024
    );
    workers.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    db.assert_invariants_and_close().await;
}
