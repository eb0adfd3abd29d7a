//! Parsers for sizes and durations on the command line.

use std::time::Duration;

/// Parses `512M`, `1G`, `64k`, `1048576` (binary multiples) into bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        format!("invalid size `{s}`: expected a number with an optional k/M/G/T suffix")
    })?;
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(format!("invalid size suffix in `{s}`: use k, M, G or T")),
    };
    let v = n
        .checked_mul(mul)
        .ok_or_else(|| format!("size `{s}` is too large"))?;
    if v == 0 {
        return Err("a size limit must be positive".into());
    }
    Ok(v)
}

/// Parses `250ms`, `30s`, `5m`, `2h` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration `{s}`: expected e.g. 30s, 5m, 250ms"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("invalid duration unit in `{s}`: use ms, s, m or h")),
    };
    if !(secs.is_finite() && secs > 0.0 && secs < 1e9) {
        return Err("a duration must be positive".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a positive CPU count (fractions allowed).
pub fn parse_cpus(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("invalid cpu count `{s}`"))?;
    if !(v.is_finite() && v > 0.0 && v <= 4096.0) {
        return Err("a cpu count must be positive".into());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("10").unwrap(), 10);
        assert!(parse_size("0").is_err());
        assert!(parse_size("5X").is_err());
        assert!(parse_size("99999999999999T").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("0").is_err());
    }
}
