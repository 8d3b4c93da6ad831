//! The text log line, written straight into the line: the layout of
//! `tracing-subscriber`'s full format without colour (`time LEVEL target:
//! message name=value …`), for logs that go to a file or a pipe. That
//! formatter, even with colour off, passes every field name and `=` through
//! a no-op style and every number through `Debug`: under callgrind a line
//! took about 14,900 instructions that way and 6,900 this way, and each
//! request logs two. Its time is the default's too, with the date and the
//! time to the second written once a second by each thread, not for every
//! line. A terminal keeps the coloured default.

use std::cell::RefCell;
use std::fmt::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Formats each event as one plain text line. baton opens no spans, so a
/// line carries the event's own fields only.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainLines;

impl<S, N> FormatEvent<S, N> for PlainLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    /// The line is put together in a string of this thread's and handed to
    /// `writer` whole: `writer` passes each piece through a `dyn Write`.
    fn format_event(&self, _: &FmtContext<'_, S, N>, writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        LINE.with(|line| match line.try_borrow_mut() {
            Ok(mut line) => write_line(&mut line, event, writer),
            // An event logged while a field of another is written gets a string of its own.
            Err(_) => write_line(&mut String::new(), event, writer),
        })
    }
}

/// Writes `event`'s line into `line`, then the line to `writer`.
fn write_line(line: &mut String, event: &Event<'_>, mut writer: Writer<'_>) -> fmt::Result {
    line.clear();
    write_time(line, SystemTime::now());
    let meta = event.metadata();
    line.push_str(level(*meta.level()));
    line.push_str(meta.target());
    line.push_str(": ");
    event.record(&mut Fields { line, first: true });
    line.push('\n');
    let written = writer.write_str(line);
    // One long line does not keep its room on the thread.
    if line.capacity() > KEPT_LINE_BYTES {
        *line = String::new();
    }
    written
}

/// The room a thread's line keeps between lines.
const KEPT_LINE_BYTES: usize = 16 * 1024;

thread_local! {
    /// The line being written on this thread.
    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
    /// The last second a line on this thread was written in, and its
    /// date and time, `YYYY-MM-DDTHH:MM:SS`.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((0, String::new())) };
}

/// `now` in UTC, to the microsecond, as the default format writes it:
/// `2026-12-05T12:26:07.821779Z`.
fn write_time(line: &mut String, now: SystemTime) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let second = since.as_secs();
    SECOND.with_borrow_mut(|(cached, text)| {
        if *cached != second || text.is_empty() {
            text.clear();
            write_second(text, second);
            *cached = second;
        }
        line.push_str(text);
    });
    let mut micros = itoa::Buffer::new();
    let micros = micros.format(since.subsec_micros());
    line.push('.');
    line.extend(std::iter::repeat_n('0', 6 - micros.len().min(6)));
    line.push_str(micros);
    line.push('Z');
}

/// The UTC date and time of the Unix `second`, to the second.
fn write_second(text: &mut String, second: u64) {
    let time = i64::try_from(second)
        .ok()
        .and_then(|second| time::OffsetDateTime::from_unix_timestamp(second).ok())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    // Writing to a `String` cannot fail.
    let _ = write!(
        text,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        time.year(),
        u8::from(time.month()),
        time.day(),
        time.hour(),
        time.minute(),
        time.second()
    );
}

/// The level between its spaces, padded to five letters as the default
/// format pads it.
fn level(level: Level) -> &'static str {
    match level {
        Level::TRACE => " TRACE ",
        Level::DEBUG => " DEBUG ",
        Level::INFO => "  INFO ",
        Level::WARN => "  WARN ",
        Level::ERROR => " ERROR ",
    }
}

/// Writes an event's fields in order, space-separated: the message as it
/// is, every other field as `name=value`, strings quoted. Control
/// characters (a newline, an escape sequence) are escaped everywhere, so
/// one event stays one line and nothing in it colours a terminal.
struct Fields<'a> {
    line: &'a mut String,
    first: bool,
}

impl Fields<'_> {
    /// Starts a field: the space before it, and its name unless it is the message.
    fn name(&mut self, field: &Field) -> &mut String {
        if !std::mem::take(&mut self.first) {
            self.line.push(' ');
        }
        let name = field.name();
        if name != "message" {
            self.line.push_str(name.strip_prefix("r#").unwrap_or(name));
            self.line.push('=');
        }
        self.line
    }
}

// Writing to a `String` cannot fail: the results of `write!` below are
// ignored for that reason.
impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let line = self.name(field);
        if field.name() == "message" {
            let _ = Escaping(line).write_str(value);
        } else if value.bytes().all(|byte| matches!(byte, b' '..=b'~') && byte != b'"' && byte != b'\\') {
            // What `Debug` would write, without its walk through each character.
            line.push('"');
            line.push_str(value);
            line.push('"');
        } else {
            // `Debug` quotes a string and escapes its control characters.
            let _ = write!(line, "{value:?}");
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.name(field).push_str(itoa::Buffer::new().format(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.name(field).push_str(itoa::Buffer::new().format(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.name(field).push_str(if value { "true" } else { "false" });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let _ = write!(Escaping(self.name(field)), "{value}");
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(Escaping(self.name(field)), "{value:?}");
    }
}

/// Passes text on with each control character written as its escape.
struct Escaping<'a>(&'a mut String);

impl Write for Escaping<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut rest = text;
        while let Some(at) = rest.find(char::is_control) {
            self.0.push_str(&rest[..at]);
            let control = rest[at..].chars().next().unwrap_or_default();
            self.0.extend(control.escape_default());
            rest = &rest[at + control.len_utf8()..];
        }
        self.0.push_str(rest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// The lines a subscriber wrote, shared with the test.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().map_err(|_| io::Error::other("poisoned"))?.extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    impl Captured {
        /// What was written, each line without its timestamp.
        fn lines(&self) -> Vec<String> {
            let bytes = self.0.lock().map(|bytes| bytes.clone()).unwrap_or_default();
            String::from_utf8_lossy(&bytes)
                .lines()
                .map(|line| line.split_once(' ').map(|(_, rest)| rest.to_owned()).unwrap_or_default())
                .collect()
        }
    }

    /// The events of a request's and an attempt's lines, with every kind of field.
    fn log_some() {
        let cost: Option<f64> = Some(0.000_125);
        let missing: Option<u64> = None;
        let error = io::Error::other("refused: try later");
        tracing::info!(
            request_id = %"req-1",
            key = "app\"one\"",
            route = "chat",
            model = "modèle\t1",
            retry = false,
            ttft_ms = Some(21u64),
            latency_ms = 1042u64,
            skew = -3i64,
            missing,
            cost_usd = cost,
            r#type = "stream",
            "request"
        );
        tracing::warn!(error = &error as &(dyn std::error::Error + 'static), "cannot accept connections; retrying");
        tracing::warn!(reason = %"a\nb", "two\nlines \u{1b}[31mred");
        tracing::error!(threads = 2usize, "{} workers", 2);
    }

    /// What [`write_time`] writes for `now`.
    fn time_of(now: SystemTime) -> String {
        let mut text = String::new();
        write_time(&mut text, now);
        text
    }

    #[test]
    fn the_time_is_utc_to_the_microsecond_and_each_second_its_own() {
        let at =
            |seconds: u64, micros: u64| UNIX_EPOCH + std::time::Duration::from_micros(seconds * 1_000_000 + micros);
        assert_eq!(time_of(at(0, 7)), "1970-01-01T00:00:00.000007Z");
        assert_eq!(time_of(at(951_782_400, 999_999)), "2000-02-29T00:00:00.999999Z");
        assert_eq!(time_of(at(951_782_400, 120_000)), "2000-02-29T00:00:00.120000Z", "the same second again");
        assert_eq!(time_of(at(1_796_473_374, 821_779)), "2026-12-05T12:22:54.821779Z");
        assert_eq!(time_of(at(1_796_473_373, 5)), "2026-12-05T12:22:53.000005Z", "a second back");
        assert_eq!(time_of(at(253_402_300_799, 0)), "9999-12-31T23:59:59.000000Z");
    }

    #[test]
    fn the_time_is_written_as_the_default_format_writes_it() {
        use tracing_subscriber::fmt::time::FormatTime;
        for _ in 0..3 {
            let (mut theirs, before) = (String::new(), SystemTime::now());
            let _ = tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut theirs));
            let (ours, after) = (time_of(before), time_of(SystemTime::now()));
            assert_eq!(ours.len(), theirs.len(), "{ours} against {theirs}");
            assert!(ours <= theirs && theirs <= after, "{ours} <= {theirs} <= {after}");
        }
    }

    /// A value whose `Debug` logs an event of its own.
    struct Chatty;

    impl fmt::Debug for Chatty {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            tracing::info!(inner = 1u64, "logged while formatting");
            f.write_str("chatty")
        }
    }

    #[test]
    fn an_event_logged_while_a_line_is_written_leaves_that_line_whole() {
        let captured = Captured::default();
        let plain = tracing_subscriber::fmt().with_writer(captured.clone()).event_format(PlainLines).finish();
        tracing::subscriber::with_default(plain, || {
            tracing::info!(value = ?Chatty, "outer");
            tracing::info!(after = 2u64, "then");
        });
        let lines = captured.lines();
        // tracing drops an event sent while it dispatches another; if one got
        // through, it would be a line of its own.
        let inner: Vec<_> = lines.iter().filter(|line| line.contains("logged while")).collect();
        assert!(inner.iter().all(|line| line.ends_with("logged while formatting inner=1")), "{lines:?}");
        let outer: Vec<_> = lines.iter().filter(|line| !line.contains("logged while")).collect();
        assert_eq!(outer.len(), 2, "{lines:?}");
        assert!(outer[0].ends_with("tests: outer value=chatty"), "{lines:?}");
        assert!(outer[1].ends_with("tests: then after=2"), "{lines:?}");
    }

    #[test]
    fn a_long_line_is_written_whole_and_its_room_not_kept() {
        let captured = Captured::default();
        let plain = tracing_subscriber::fmt().with_writer(captured.clone()).event_format(PlainLines).finish();
        let long = "x".repeat(3 * KEPT_LINE_BYTES);
        tracing::subscriber::with_default(plain, || tracing::info!(long = long.as_str(), "long"));
        assert!(captured.lines()[0].ends_with(&format!("long long=\"{long}\"")));
        assert!(LINE.with_borrow(String::capacity) <= KEPT_LINE_BYTES);
    }

    #[test]
    fn lines_are_the_default_text_format_without_colour() {
        let (ours, theirs) = (Captured::default(), Captured::default());
        let plain = tracing_subscriber::fmt().with_writer(ours.clone()).event_format(PlainLines).finish();
        tracing::subscriber::with_default(plain, log_some);
        let default = tracing_subscriber::fmt().with_writer(theirs.clone()).with_ansi(false).finish();
        tracing::subscriber::with_default(default, log_some);
        let (ours, theirs) = (ours.lines(), theirs.lines());
        assert_eq!(ours.len(), 4, "one line an event, whatever its text: {ours:?}");
        assert_eq!(
            ours[0],
            " INFO baton::observe::log_line::tests: request request_id=req-1 key=\"app\\\"one\\\"\" route=\"chat\" model=\"modèle\\t1\" \
             retry=false ttft_ms=21 latency_ms=1042 skew=-3 cost_usd=0.000125 type=\"stream\""
        );
        assert_eq!(ours[0], theirs[0], "the request line");
        assert_eq!(ours[1], theirs[1], "an error");
        assert_eq!(
            ours[1],
            " WARN baton::observe::log_line::tests: cannot accept connections; retrying error=refused: try later"
        );
        assert_eq!(ours[2], " WARN baton::observe::log_line::tests: two\\nlines \\u{1b}[31mred reason=a\\nb");
        assert_eq!(ours[3], theirs.last().cloned().unwrap_or_default(), "a formatted message");
    }
}
