//! How the plugin writes for people: relative times the way kubectl writes ages, colour only
//! on a terminal, and tables aligned like kubectl's.

use std::io::Write;

use jiff::Timestamp;
use tabwriter::TabWriter;

use crate::api::Time;

/// A span of seconds as kubectl writes an age: `42s`, `3m5s`, `12m`, `3h5m`, `26h`, `3d4h`, `40d`.
pub fn span(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        match s % 60 {
            0 => format!("{m}m"),
            rest => format!("{m}m{rest}s"),
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        match m % 60 {
            0 => format!("{h}h"),
            rest => format!("{h}h{rest}m"),
        }
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        match h % 24 {
            0 => format!("{d}d"),
            rest => format!("{d}d{rest}h"),
        }
    } else {
        format!("{d}d")
    }
}

/// A duration of the API (`Duration`) as a span.
pub fn duration(d: crate::api::Duration) -> String {
    let millis = d.as_millis();
    if millis > 0 && millis < 1000 {
        return format!("{millis}ms");
    }
    span(i64::try_from(millis / 1000).unwrap_or(i64::MAX))
}

/// Seconds from `from` to `to` (negative when `to` is earlier).
pub fn seconds(from: Timestamp, to: Timestamp) -> i64 {
    to.as_second() - from.as_second()
}

/// A time relative to now: `3m ago`, `in 42s`, or `just now`.
pub fn relative(now: Timestamp, at: Timestamp) -> String {
    match seconds(now, at) {
        0 => "just now".to_string(),
        d if d > 0 => format!("in {}", span(d)),
        d => format!("{} ago", span(-d)),
    }
}

/// `relative` of an API time.
pub fn when(now: Timestamp, at: &Time) -> String {
    relative(now, at.0)
}

/// The absolute time people can search logs for: `2026-11-22 14:05:09 UTC`.
pub fn absolute(at: &Time) -> String {
    at.0.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// One line of a message, cut to `max` characters with an ellipsis.
pub fn one_line(message: &str, max: usize) -> String {
    let line: String = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Terminal colours, or none. Colour is used only when standard output is a terminal and
/// `NO_COLOR` is not set, so piped output and files stay plain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paint {
    pub on: bool,
}

impl Paint {
    /// Colour if standard output is a terminal and `NO_COLOR` is unset or empty.
    pub fn for_stdout() -> Paint {
        use std::io::IsTerminal;
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Paint {
            on: std::io::stdout().is_terminal() && !no_color,
        }
    }

    pub const PLAIN: Paint = Paint { on: false };

    fn wrap(self, code: &str, text: &str) -> String {
        if self.on && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    pub fn red(self, text: &str) -> String {
        self.wrap("31", text)
    }

    pub fn green(self, text: &str) -> String {
        self.wrap("32", text)
    }

    pub fn yellow(self, text: &str) -> String {
        self.wrap("33", text)
    }

    pub fn bold(self, text: &str) -> String {
        self.wrap("1", text)
    }

    pub fn dim(self, text: &str) -> String {
        self.wrap("2", text)
    }

    /// A phase in the colour that says how well the agent is: green running, yellow waiting,
    /// red stopped or broken, plain when it chose to stop or someone suspended it.
    pub fn phase(self, phase: &str) -> String {
        match phase {
            "Running" => self.green(phase),
            "Pending" | "BackingOff" | "Starting" | "Restarting" => self.yellow(phase),
            "CircuitOpen" | "Stopped" | "Escalated" | "Missing" => self.red(phase),
            _ => phase.to_string(),
        }
    }
}

/// Rows aligned in columns, two spaces apart, headers in capitals, as kubectl prints them.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut writer = TabWriter::new(Vec::new())
        .padding(3)
        .ansi(true)
        .alignment(tabwriter::Alignment::Left);
    let line = |cells: &mut dyn Iterator<Item = &str>| cells.collect::<Vec<_>>().join("\t");
    let _ = writeln!(writer, "{}", line(&mut headers.iter().copied()));
    for row in rows {
        // A tab inside a cell would shift every column after it.
        let cells: Vec<String> = row.iter().map(|c| c.replace(['\t', '\n'], " ")).collect();
        let _ = writeln!(writer, "{}", line(&mut cells.iter().map(String::as_str)));
    }
    let bytes = writer.into_inner().unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_like_kubectl_ages() {
        let cases = [
            (-5, "0s"),
            (0, "0s"),
            (42, "42s"),
            (119, "119s"),
            (120, "2m"),
            (185, "3m5s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (26 * 3600, "26h"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (40 * 86_400, "40d"),
        ];
        for (secs, want) in cases {
            assert_eq!(span(secs), want, "{secs}s");
        }
    }

    #[test]
    fn relative_times_say_which_way() {
        let now: Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
        let later: Timestamp = "2026-11-22T12:00:42Z".parse().unwrap();
        let earlier: Timestamp = "2026-11-22T11:57:00Z".parse().unwrap();
        assert_eq!(relative(now, later), "in 42s");
        assert_eq!(relative(now, earlier), "3m ago");
        assert_eq!(relative(now, now), "just now");
    }

    #[test]
    fn messages_are_cut_to_one_line() {
        assert_eq!(one_line("a\n  b\tc", 10), "a b c");
        assert_eq!(one_line("abcdefghijkl", 5), "abcd…");
        assert_eq!(one_line("ééééé", 5), "ééééé");
    }

    #[test]
    fn colour_only_when_asked() {
        assert_eq!(Paint::PLAIN.red("x"), "x");
        assert_eq!(Paint { on: true }.red("x"), "\x1b[31mx\x1b[0m");
    }

    #[test]
    fn tables_align_columns_even_with_colour() {
        let paint = Paint { on: true };
        let rows = vec![
            vec!["a".to_string(), paint.green("Running"), "1".to_string()],
            vec![
                "longer-name".to_string(),
                "Stopped".to_string(),
                "12".to_string(),
            ],
        ];
        let out = table(&["NAME", "PHASE", "RESTARTS"], &rows);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "NAME          PHASE     RESTARTS");
        assert_eq!(lines[2], "longer-name   Stopped   12");
        assert_eq!(lines[1], "a             \x1b[32mRunning\x1b[0m   1");
    }
}
