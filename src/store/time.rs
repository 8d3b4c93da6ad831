//! Times as the admin endpoints take and give them: RFC 3339 in UTC out;
//! in, RFC 3339, Unix milliseconds, or a span back from now (`30m`, `24h`,
//! `7d`). Rows keep Unix milliseconds, which both databases sort alike.

/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

/// `ms` (Unix milliseconds) as `2026-12-01T09:30:00.123Z`.
pub fn rfc3339(ms: i64) -> String {
    let (days, in_day) = (ms.div_euclid(DAY_MS), ms.rem_euclid(DAY_MS));
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (in_day / 3_600_000, in_day / 60_000 % 60);
    let (second, milli) = (in_day / 1000 % 60, in_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

/// Reads an instant: RFC 3339 (`2026-12-01T09:30:00Z`, with an offset or
/// fractional seconds), Unix milliseconds, or a span back from `now_ms`
/// (`90s`, `30m`, `24h`, `7d`). `None` when it is none of these.
pub fn parse_instant(text: &str, now_ms: i64) -> Option<i64> {
    let text = text.trim();
    if let Some(ms) = text.parse::<i64>().ok().filter(|ms| *ms >= 0) {
        return Some(ms);
    }
    if let Some(span) = parse_span(text) {
        return Some(now_ms.saturating_sub(span));
    }
    parse_rfc3339(text)
}

/// `90s`, `30m`, `24h`, `7d` in milliseconds.
fn parse_span(text: &str) -> Option<i64> {
    let unit = match text.chars().last()? {
        's' => 1000,
        'm' => 60_000,
        'h' => 3_600_000,
        'd' => DAY_MS,
        _ => return None,
    };
    let count: i64 = text[..text.len() - 1].parse().ok().filter(|n| *n >= 0)?;
    count.checked_mul(unit)
}

fn parse_rfc3339(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = text.get(range)?;
        digits.bytes().all(|b| b.is_ascii_digit()).then(|| digits.parse().ok())?
    };
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if bytes.len() < 20
        || separators.iter().any(|(at, sep)| bytes[*at] != *sep)
        || !matches!(bytes[10], b'T' | b't' | b' ')
    {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let first3: String = fraction[..digits].chars().chain("000".chars()).take(3).collect();
        millis = first3.parse().ok()?;
        rest = &fraction[digits..];
    }
    let offset_ms = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (hours, minutes) = rest.get(1..)?.split_once(':')?;
            let two_digits = |text: &str| text.len() == 2 && text.bytes().all(|b| b.is_ascii_digit());
            if !two_digits(hours) || !two_digits(minutes) {
                return None;
            }
            let (hours, minutes): (i64, i64) = (hours.parse().ok()?, minutes.parse().ok()?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            sign * (hours * 3_600_000 + minutes * 60_000)
        }
    };
    let days = days_from_civil(year, month, day);
    Some(days * DAY_MS + hour * 3_600_000 + minute * 60_000 + second * 1000 + millis - offset_ms)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_written_as_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_117_400_123), "2026-12-01T09:30:00.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z", "a leap day");
    }

    #[test]
    fn instants_are_read_in_each_form() {
        let now = 1_796_117_400_123;
        assert_eq!(parse_instant("2026-12-01T09:30:00.123Z", 0), Some(now));
        assert_eq!(parse_instant("2026-12-01T10:30:00.123+01:00", 0), Some(now), "an offset");
        assert_eq!(parse_instant("2026-12-01T09:30:00.1234567Z", 0), Some(now), "finer than ms");
        assert_eq!(parse_instant("1796117400123", 0), Some(now), "Unix ms");
        assert_eq!(parse_instant("30m", now), Some(now - 1_800_000));
        assert_eq!(parse_instant("7d", now), Some(now - 7 * DAY_MS));
        for round in [0, 951_782_400_000, now, 4_102_444_800_000] {
            assert_eq!(parse_instant(&rfc3339(round), 0), Some(round), "{round} round trips");
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-12-01",
            "2026-12-01T09:30:00",
            "-5",
            "5w",
            "m",
            "2026-12-01T09:30:00.Z",
        ] {
            assert_eq!(parse_instant(bad, 1000), None, "{bad:?}");
        }
    }
}
