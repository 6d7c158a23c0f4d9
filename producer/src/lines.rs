//! Files read line by line, for request files ([`crate::bulk`]) and venue
//! files ([`crate::venue`]) alike, and the [`BadLine`] each reports for a
//! line it cannot take. Imports nothing of this crate's.
//!
//! JSON lines are [`numbered_lines`]. CSV files are [`records`] (by the
//! `csv` crate, RFC 4180 quoting), each numbered by the line it starts on,
//! then a header and the lines after it ([`after_header`]). A record that
//! cannot be read, or a header that cannot, is a [`BadLine`] like any other,
//! reported where it stands.
//!
//! A CSV record is one line: no field of either kind of file may hold a line
//! break (names, refs and labels refuse control characters). A quoted field
//! that runs over line breaks is therefore a quote left open by mistake,
//! which would read the lines after it as part of one field: the record is
//! a bad line on the line it starts on, saying which lines it swallowed, and
//! each swallowed line is a bad line of its own, so that every line of the
//! file is answered.

use std::io::{BufRead, Read};

use crate::outcome::ErrorCode;

/// A line that cannot be enqueued (or imported); serialised as
/// `{"line", "code", "reason"}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    /// The error code (`invalid_json` when the line is not a request object).
    pub code: ErrorCode,
    pub reason: String,
}

/// The lines of a file, numbered from 1, each without its line ending (and
/// the first without a byte-order mark, as some editors write one), or why
/// it is not UTF-8: what every line-by-line file reader here starts from.
pub(crate) fn numbered_lines(
    mut reader: impl BufRead,
) -> impl Iterator<Item = std::io::Result<(usize, Result<String, std::str::Utf8Error>)>> {
    let mut buf = Vec::new();
    let mut n = 0;
    std::iter::from_fn(move || {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Err(e) => return Some(Err(e)),
            Ok(0) => return None,
            Ok(_) => n += 1,
        }
        let mut bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
        bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if n == 1 {
            bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
        }
        Some(Ok((n, std::str::from_utf8(bytes).map(str::to_string))))
    })
}

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
/// as some editors write one) or why it is not a line of CSV in UTF-8. A
/// record that runs over line breaks is refused on its first line, and each
/// line it swallowed on its own (see the [module](self) docs). Only an I/O
/// error fails.
pub(crate) fn records(mut reader: impl Read, dialect: Dialect) -> std::io::Result<Vec<Record>> {
    // Read whole, to number the lines: the csv crate's record positions
    // count from where it started reading, before any blank (or comment)
    // lines it skipped.
    let mut data = Vec::new();
    reader.read_to_end(&mut data)?;
    let mut lines = LineNumbers { data: &data, offset: 0, line: 1, comments: dialect.lenient };
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
                other => {
                    records.push((lines.at(csv.position().byte() as usize), Err(format!("not CSV: {other:?}"))));
                    continue;
                }
            },
        }
        let n = lines.at(record.position().map_or(0, |p| p.byte() as usize));
        // The record's bytes: from its first line to where the reader stopped.
        let end = usize::try_from(csv.position().byte()).map_or(data.len(), |end| end.clamp(lines.offset, data.len()));
        if let Some(span) = Span::of(&data[lines.offset..end]) {
            records.push((n, Err(span.reason(n))));
            let swallowed = data[lines.offset..end].split(|b| *b == b'\n').enumerate().skip(1).take(span.breaks);
            for (i, line) in swallowed {
                if !dialect.skips(line) {
                    records.push((n + i, Err(format!("swallowed by the unclosed quote on line {n}"))));
                }
            }
            continue;
        }
        if dialect.lenient && record.iter().all(|cell| cell.is_empty()) {
            continue;
        }
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

impl Dialect {
    /// Whether the reader skips this line (without its line break) rather
    /// than read it as a record: a blank line, or in a lenient file a
    /// comment or a line of only empty cells.
    fn skips(self, line: &[u8]) -> bool {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        line.is_empty()
            || (self.lenient && (line.starts_with(b"#") || line.iter().all(|b| b.is_ascii_whitespace() || *b == b',')))
    }
}

/// A record that runs over line breaks, all inside quotes (outside them a
/// line break ends the record).
struct Span {
    /// The line breaks it holds: the lines it swallowed.
    breaks: usize,
    /// After how many of them the quote that carried it over the first
    /// closes; none if it never does (the record runs to the end of the file).
    closed: Option<usize>,
}

impl Span {
    /// The span of a record's bytes (from its first byte to where the reader
    /// stopped after it), if it holds a line break. Quotes are read as the
    /// `csv` crate reads them: a quote opens a quoted field only at the
    /// field's start, a doubled quote inside it is a quote, and the next
    /// single one closes it.
    fn of(bytes: &[u8]) -> Option<Span> {
        #[derive(Clone, Copy, PartialEq, Eq)]
        enum At {
            FieldStart,
            Unquoted,
            Quoted,
            /// A quote in a quoted field: doubled, or the field's end.
            QuoteInQuoted,
        }
        let mut at = At::FieldStart;
        let (mut breaks, mut closed) = (0, None);
        for (i, &b) in bytes.iter().enumerate() {
            if at == At::QuoteInQuoted && b != b'"' && breaks > 0 {
                closed.get_or_insert(breaks);
            }
            at = match (at, b) {
                (At::Quoted, b'"') => At::QuoteInQuoted,
                // A line break last of the bytes is the file's last (only a
                // quote never closed reads to the end): it starts no line.
                (At::Quoted, b'\n') if i + 1 < bytes.len() => {
                    breaks += 1;
                    At::Quoted
                }
                (At::Quoted, _) => At::Quoted,
                (At::FieldStart | At::QuoteInQuoted, b'"') => At::Quoted,
                (_, b'\n' | b'\r') => break,
                (_, b',') => At::FieldStart,
                _ => At::Unquoted,
            };
        }
        if at == At::QuoteInQuoted && breaks > 0 {
            closed.get_or_insert(breaks);
        }
        (breaks > 0).then_some(Span { breaks, closed })
    }

    /// Why the record starting on `line` is refused: the lines it swallowed.
    fn reason(&self, line: usize) -> String {
        let last = line + self.breaks;
        match self.closed {
            Some(breaks) => format!(
                "a quote opened on line {line} is not closed until line {}: lines {line}-{last} read as one record",
                line + breaks
            ),
            None => format!(
                "a quote opened on line {line} is never closed: lines {line}-{last}, to the end of the file, \
                 read as one record"
            ),
        }
    }
}

/// Why a header is refused: the code of its bad line and the reason. A
/// reason alone is a `missing_column`.
pub(crate) struct Refusal {
    pub code: ErrorCode,
    pub reason: String,
}

impl From<String> for Refusal {
    fn from(reason: String) -> Refusal {
        Refusal { code: ErrorCode::MissingColumn, reason }
    }
}

/// The header of a file's records, as `header` reads its cells, and every
/// line after it, in file order; a record that cannot be read is an
/// `invalid_line`. Without a header (`header` refuses the first line, with
/// its code, or there is none: `no_header` says what it should have been, a
/// `missing_column`), the bad lines up to there, the last the header's: no
/// line after it can be read.
pub(crate) fn after_header<H, E: Into<Refusal>>(
    records: Vec<Record>,
    header: impl Fn(&[String]) -> Result<H, E>,
    no_header: &str,
) -> Result<(H, Vec<Line>), Vec<BadLine>> {
    let mut found = None;
    let mut lines = Vec::with_capacity(records.len());
    // Before the header, only bad lines.
    let refused = |lines: Vec<Line>| lines.into_iter().filter_map(Result::err).collect();
    for (n, cells) in records {
        let bad = |code: ErrorCode, reason: String| BadLine { line: n, code, reason };
        match (cells, &found) {
            (Err(reason), _) => lines.push(Err(bad(ErrorCode::InvalidLine, reason))),
            (Ok(cells), Some(_)) => lines.push(Ok((n, cells))),
            (Ok(cells), None) => match header(&cells) {
                Ok(h) => found = Some(h),
                Err(refusal) => {
                    let Refusal { code, reason } = refusal.into();
                    lines.push(Err(bad(code, reason)));
                    return Err(refused(lines));
                }
            },
        }
    }
    match found {
        Some(h) => Ok((h, lines)),
        None => {
            lines.push(Err(BadLine { line: 1, code: ErrorCode::MissingColumn, reason: no_header.to_string() }));
            Err(refused(lines))
        }
    }
}

/// Line numbers of a file's records, found from their byte offsets in
/// increasing order.
struct LineNumbers<'a> {
    data: &'a [u8],
    /// The offset counted up to (after [`LineNumbers::at`], where the record
    /// starts), and the line it is on.
    offset: usize,
    line: usize,
    /// Whether a line starting with `#` is a comment, skipped like a blank one.
    comments: bool,
}

impl LineNumbers<'_> {
    /// The line of the record read from `offset` on: the first line from
    /// there that is not blank (nor a comment).
    fn at(&mut self, offset: usize) -> usize {
        let mut end = offset.max(self.offset);
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
        self.line += self.data[self.offset..end].iter().filter(|b| **b == b'\n').count();
        self.offset = end;
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each record's line and its first cell, or why it is bad.
    fn read(text: &str, lenient: bool) -> Vec<(usize, Result<String, String>)> {
        let records = records(text.as_bytes(), Dialect { lenient }).expect("read");
        records.into_iter().map(|(n, cells)| (n, cells.map(|c| c.join("|")))).collect()
    }

    #[test]
    fn a_record_over_several_lines_is_refused_in_either_dialect() {
        let swallowed = |n| Err(format!("swallowed by the unclosed quote on line {n}"));
        // A venue file: the quote swallows a comment, a blank line and a
        // line of empty cells, none of them records had it been closed.
        let venue = "section,row\r\n# boxes\r\n\"Box A,1\r\n# left\r\n\r\n , ,\r\nBox B,2\"\r\nStalls,A\r\n";
        assert_eq!(
            read(venue, true),
            [
                (1, Ok("section|row".to_string())),
                (3, Err("a quote opened on line 3 is not closed until line 7: lines 3-7 read as one record".into())),
                (7, swallowed(3)),
                (8, Ok("Stalls|A".into())),
            ]
        );
        // A request file: only a blank line is no line.
        let parties = "kind,customer\nbook,\"Smith\n# note\n\n , \nbook,Lee\"\nbook,Kim\n";
        assert_eq!(
            read(parties, false),
            [
                (1, Ok("kind|customer".to_string())),
                (2, Err("a quote opened on line 2 is not closed until line 6: lines 2-6 read as one record".into())),
                (3, swallowed(2)),
                (5, swallowed(2)),
                (6, swallowed(2)),
                (7, Ok("book|Kim".into())),
            ]
        );
        // Two quoted fields over lines: named by the first, to the record's end.
        assert_eq!(
            read("a,b\n\"1\n2\",\"3\n4\"\nc,d", false),
            [
                (1, Ok("a|b".to_string())),
                (2, Err("a quote opened on line 2 is not closed until line 3: lines 2-4 read as one record".into())),
                (3, swallowed(2)),
                (4, swallowed(2)),
                (5, Ok("c|d".into())),
            ]
        );
    }
}
