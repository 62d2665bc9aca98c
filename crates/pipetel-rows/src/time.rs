//! Row times as RFC 3339 text, as the stores rows are shipped to write them.

/// Milliseconds since the epoch and the sub-millisecond rest (ns) of an RFC 3339 UTC time such
/// as `2026-12-02T10:00:29.29980714Z` (VictoriaLogs' `_time` of a row); `None` for any other
/// text.
pub fn parse_utc(t: &str) -> Option<(u64, u32)> {
    let (date, time) = t.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut h = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (h.next()??, h.next()??, h.next()??);
    if !frac.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 9 {
        return None;
    }
    let ns: u32 = format!("{frac:0<9}").parse().ok()?;
    // Days since 1970-01-01 from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = u64::try_from((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000).ok()? + u64::from(ns / 1_000_000);
    Some((ms, ns % 1_000_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_to_milliseconds_and_nanoseconds() {
        let ms = |t| parse_utc(t).map(|(ms, _)| ms);
        assert_eq!(ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(ms("2000-02-29T00:00:00.123456789Z"), Some(951_782_400_123));
        assert_eq!(ms("2024-12-31T23:59:59.9Z"), Some(1_735_689_599_900));
        assert_eq!(parse_utc("2026-12-02T10:00:29.297775696Z"), Some((1_796_205_629_297, 775_696)));
        assert_eq!(ms("2024-12-31 23:59:59"), None);
        assert_eq!(ms("2026-12-02 10:00:29Z"), None);
    }
}
