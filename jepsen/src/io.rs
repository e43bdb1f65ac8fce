//! Reading and writing histories as JSON Lines.
//!
//! The writer assigns indexes so a producer of histories (the simulator, a real-cluster test)
//! never has to; the reader checks every line and names the line of the first problem.

use crate::history::{Event, EventType, Function, Index, Nanos, Process, Value};
use std::io::{self, BufRead, Write};

/// A history file could not be read: the error names the 1-based line.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("line {line}: cannot read the history: {source}")]
    Io {
        line: u64,
        #[source]
        source: io::Error,
    },
    /// The line is not a well-formed event (bad JSON, missing field, wrong type, bad value).
    #[error("line {line}, column {column}: {message}")]
    Malformed {
        line: u64,
        column: u64,
        message: String,
    },
    /// The line is a well-formed event that does not fit the history (e.g. index order).
    #[error("line {line}: {message}")]
    Invalid { line: u64, message: String },
}

impl HistoryError {
    /// The 1-based line number the error is about.
    pub fn line(&self) -> u64 {
        match self {
            HistoryError::Io { line, .. }
            | HistoryError::Malformed { line, .. }
            | HistoryError::Invalid { line, .. } => *line,
        }
    }
}

/// Writes events as JSON Lines to any `io::Write`, assigning indexes 0, 1, 2, ...
///
/// Wrap files in a `BufWriter`; call [`HistoryWriter::flush`] (or `into_inner`) at the end.
pub struct HistoryWriter<W: Write> {
    out: W,
    next_index: Index,
}

impl<W: Write> HistoryWriter<W> {
    pub fn new(out: W) -> Self {
        Self { out, next_index: 0 }
    }

    /// Writes one event and returns the index it was given.
    pub fn write(
        &mut self,
        time: Nanos,
        process: Process,
        kind: EventType,
        f: Function,
        value: Value,
    ) -> io::Result<Index> {
        let mut event = Event::new(0, time, process, kind, f, value);
        self.write_event(&mut event)
    }

    /// Writes `event`, first setting its `index` to the next one (so callers that keep the
    /// events in memory, e.g. to call [`crate::check`] directly, hold the same indexes).
    /// An event whose value does not fit its `f` and `type` (see [`Event::validate`]) is an
    /// `InvalidInput` error and is not written.
    pub fn write_event(&mut self, event: &mut Event) -> io::Result<Index> {
        // A history must read back: refuse to write what the reader would reject.
        event
            .validate()
            .map_err(|msg| io::Error::new(io::ErrorKind::InvalidInput, msg))?;
        event.index = self.next_index;
        serde_json::to_writer(&mut self.out, event).map_err(io::Error::other)?;
        self.out.write_all(b"\n")?;
        self.next_index += 1;
        Ok(event.index)
    }

    /// The index the next event will get (= events written so far).
    pub fn next_index(&self) -> Index {
        self.next_index
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn get_ref(&self) -> &W {
        &self.out
    }

    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Iterates over the events of a JSON Lines history, one line at a time.
///
/// Blank lines are skipped. Indexes must strictly increase (a concatenation of two histories
/// is an error, not a silently merged history). Stops after the first error.
pub struct HistoryReader<R: BufRead> {
    input: R,
    buf: Vec<u8>,
    line: u64,
    last_index: Option<Index>,
    failed: bool,
}

impl<R: BufRead> HistoryReader<R> {
    pub fn new(input: R) -> Self {
        Self {
            input,
            buf: Vec::with_capacity(256),
            line: 0,
            last_index: None,
            failed: false,
        }
    }

    fn next_event(&mut self) -> Option<Result<Event, HistoryError>> {
        loop {
            self.buf.clear();
            self.line += 1;
            let line = self.line;
            match self.input.read_until(b'\n', &mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(source) => return Some(Err(HistoryError::Io { line, source })),
            }
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            // The fast path reads the common lines; serde reads (or rejects) everything else.
            let event = match crate::fast::parse_line(&self.buf) {
                Some(event) => event,
                None => match serde_json::from_slice::<Event>(&self.buf) {
                    Ok(event) => event,
                    Err(err) => return Some(Err(malformed(line, &err))),
                },
            };
            if let Some(last) = self.last_index {
                if event.index <= last {
                    return Some(Err(HistoryError::Invalid {
                        line,
                        message: format!(
                            "index {} does not follow index {last} of the line before",
                            event.index
                        ),
                    }));
                }
            }
            self.last_index = Some(event.index);
            return Some(Ok(event));
        }
    }
}

impl<R: BufRead> Iterator for HistoryReader<R> {
    type Item = Result<Event, HistoryError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.next_event();
        if matches!(item, Some(Err(_))) {
            self.failed = true;
        }
        item
    }
}

/// Reads a whole history; the first bad line is an error naming it.
pub fn read_history(input: impl BufRead) -> Result<Vec<Event>, HistoryError> {
    HistoryReader::new(input).collect()
}

/// serde_json's message says "at line 1 column N" of the one-line document; name the
/// history's line instead and keep the column.
fn malformed(line: u64, err: &serde_json::Error) -> HistoryError {
    let text = err.to_string();
    let message = match text.rfind(" at line ") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    };
    let message = if err.is_eof() {
        format!("truncated event: {message}")
    } else {
        message
    };
    HistoryError::Malformed {
        line,
        column: err.column() as u64,
        message,
    }
}
