//! CSV files read line by line, for request files ([`crate::bulk`]) and
//! venue files ([`crate::venue`]) alike: the records (by the `csv` crate,
//! RFC 4180 quoting), each numbered by the line it starts on, then a header
//! and the lines after it. A record that cannot be read, or a header that
//! cannot, is a [`BadLine`] like any other, reported where it stands.

use std::io::Read;

use crate::bulk::BadLine;

/// How a kind of file is read beyond RFC 4180.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dialect {
    /// Spaces around a cell trimmed, lines starting with `#` and lines of
    /// only empty cells skipped (venue files, which people write by hand).
    pub lenient: bool,
}

/// A CSV record: the number of the line it starts on, and its cells or why
/// it cannot be read.
pub(crate) type Record = (usize, Result<Vec<String>, String>);

/// A line after the header: its number and its cells, or why it is bad.
pub(crate) type Line = Result<(usize, Vec<String>), BadLine>;

/// The records of a CSV file (blank lines skipped), each with the number of
/// the line it starts on, as its cells (the first without a byte-order mark,
/// as some editors write one) or why it is not a line of CSV in UTF-8. Only
/// an I/O error fails.
pub(crate) fn records(mut reader: impl Read, dialect: Dialect) -> std::io::Result<Vec<Record>> {
    // Read whole, to number the lines: the csv crate's record positions
    // count from where it started reading, before any blank (or comment)
    // lines it skipped.
    let mut data = Vec::new();
    reader.read_to_end(&mut data)?;
    let mut lines = LineNumbers { data: &data, at: 0, line: 1, comments: dialect.lenient };
    let mut builder = csv::ReaderBuilder::new();
    // Each line's cell count is checked by the reader of the lines, to say
    // which line is short.
    builder.has_headers(false).flexible(true);
    if dialect.lenient {
        builder.trim(csv::Trim::All).comment(Some(b'#'));
    }
    let mut csv = builder.from_reader(data.as_slice());
    let mut record = csv::ByteRecord::new();
    let mut records = Vec::new();
    loop {
        match csv.read_byte_record(&mut record) {
            Ok(false) => return Ok(records),
            Ok(true) => {}
            Err(e) => match e.into_kind() {
                csv::ErrorKind::Io(e) => return Err(e),
                // An unclosed quote runs to the end of the file.
                other => {
                    records.push((lines.at(csv.position().byte() as usize), Err(format!("not CSV: {other:?}"))));
                    continue;
                }
            },
        }
        if dialect.lenient && record.iter().all(|cell| cell.is_empty()) {
            continue;
        }
        let n = lines.at(record.position().map_or(0, |p| p.byte() as usize));
        let cells: Result<Vec<String>, _> =
            record.iter().map(|cell| std::str::from_utf8(cell).map(str::to_string)).collect();
        let cells = cells.map_err(|e| format!("not valid UTF-8: {e}")).map(|mut cells| {
            if records.is_empty()
                && let Some(first) = cells.first_mut()
                && let Some(rest) = first.strip_prefix('\u{feff}')
            {
                *first = rest.to_string();
            }
            cells
        });
        records.push((n, cells));
    }
}

/// The header of a file's records, as `header` reads its cells, and every
/// line after it, in file order; a record that cannot be read is an
/// `invalid_line`. Without a header (`header` refuses the first line, or
/// there is none: `no_header` says what it should have been), the bad lines
/// up to there, the last a `missing_column`: no line after it can be read.
pub(crate) fn after_header<H>(
    records: Vec<Record>,
    header: impl Fn(&[String]) -> Result<H, String>,
    no_header: &str,
) -> Result<(H, Vec<Line>), Vec<BadLine>> {
    let mut found = None;
    let mut lines = Vec::with_capacity(records.len());
    // Before the header, only bad lines.
    let refused = |lines: Vec<Line>| lines.into_iter().filter_map(Result::err).collect();
    for (n, cells) in records {
        let bad = |code: &str, reason: String| BadLine { line: n, code: code.to_string(), reason };
        match (cells, &found) {
            (Err(reason), _) => lines.push(Err(bad("invalid_line", reason))),
            (Ok(cells), Some(_)) => lines.push(Ok((n, cells))),
            (Ok(cells), None) => match header(&cells) {
                Ok(h) => found = Some(h),
                Err(reason) => {
                    lines.push(Err(bad("missing_column", reason)));
                    return Err(refused(lines));
                }
            },
        }
    }
    match found {
        Some(h) => Ok((h, lines)),
        None => {
            lines.push(Err(BadLine { line: 1, code: "missing_column".into(), reason: no_header.to_string() }));
            Err(refused(lines))
        }
    }
}

/// Line numbers of a file's records, found from their byte offsets in
/// increasing order.
struct LineNumbers<'a> {
    data: &'a [u8],
    /// The offset counted up to, and the line it is on.
    at: usize,
    line: usize,
    /// Whether a line starting with `#` is a comment, skipped like a blank one.
    comments: bool,
}

impl LineNumbers<'_> {
    /// The line of the record read from `offset` on: the first line from
    /// there that is not blank (nor a comment).
    fn at(&mut self, offset: usize) -> usize {
        let mut end = offset.max(self.at);
        while let Some(&b) = self.data.get(end) {
            match b {
                b'\n' | b'\r' => end += 1,
                // A comment: on to its line end, which counts the line.
                b'#' if self.comments => {
                    end += self.data[end..].iter().position(|&b| b == b'\n').unwrap_or(self.data.len() - end)
                }
                _ => break,
            }
        }
        let end = end.min(self.data.len());
        self.line += self.data[self.at..end].iter().filter(|b| **b == b'\n').count();
        self.at = end;
        self.line
    }
}
