//! `kubectl agent history NAME`: one line per attempt — when it started, how long it ran, how it
//! ended (a shutdown too), how long the backoff was, what it spent — with a timeline people read
//! at a glance.
//!
//! Pure: built from the Agent alone.

use jiff::Timestamp;
use serde::Serialize;

use super::spend;
use super::text::{Paint, duration, one_line, relative, span, table};
use crate::api::{
    Agent, AgentStatus, Duration, FailureReason, Phase, RestartRecord, Shutdown, ShutdownType,
    Spend, Time, Trigger,
};

/// One attempt, as `history` shows it and `-o json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    pub attempt: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ran_for: Option<Duration>,
    /// When it ended; absent while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Time>,
    /// How it ended: a failure reason, or what replaced it (`Manual`, `Rollout`, `Group`);
    /// `Economic` or `Voluntary` for a shutdown no crash came with (see `shutdown`); `Running` or
    /// `Pending` for the current attempt.
    pub ended: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What caused the restart after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Duration>,
    /// When the next attempt started; absent while that restart is pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<Time>,
    /// Whether it is the attempt running now.
    pub current: bool,
    /// The checkpoint it resumed from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// How far it got, as the agent reported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<u64>,
    /// What it spent, as its last report said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend: Option<Spend>,
    /// The shutdown it ended in (`status.shutdown`: its type, reason and who recorded it, such
    /// as the `Budget`); no restart follows one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<Shutdown>,
    /// No restart follows it: the agent is `Stopped` (its policy or its group gave up).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

/// The agent's attempts, oldest first: one per history entry, then the last attempt if it ended
/// in a shutdown, or the current one if a pod is running or starting for it.
pub fn attempts(agent: &Agent) -> Vec<Attempt> {
    let status = agent.status.clone().unwrap_or_default();
    let mut out: Vec<Attempt> = status
        .restart_history
        .iter()
        .rev()
        .map(from_record)
        .collect();
    // An entry without its own start began when the one before it restarted.
    for i in 1..out.len() {
        if out[i].started_at.is_none() && out[i - 1].attempt + 1 == out[i].attempt {
            out[i].started_at = out[i - 1].restarted_at.clone();
        }
    }
    // A shutdown ends the last attempt: its crash, when one is recorded, has no restart after it.
    if let Some(shutdown) = &status.shutdown
        && let Some(last) = out.last_mut()
        && last.attempt == status.attempt
        && last.restarted_at.is_none()
    {
        last.shutdown = Some(shutdown.clone());
    }
    // Given up on: the last crash has no restart after it either, until a reset.
    if status.phase == Some(Phase::Stopped)
        && let Some(last) = out.last_mut()
        && last.attempt == status.attempt
        && last.restarted_at.is_none()
    {
        last.stopped = true;
    }
    let last = status.attempt > 0 && out.last().is_none_or(|last| last.attempt < status.attempt);
    let running = matches!(status.phase, Some(Phase::Running | Phase::Pending));
    if last && (running || status.shutdown.is_some()) {
        let started_at = out
            .last()
            .filter(|last| last.attempt + 1 == status.attempt)
            .and_then(|last| last.restarted_at.clone());
        out.push(last_attempt(&status, started_at));
    }
    out
}

/// The attempt after the history's last: running, or ended by a shutdown (recorded in
/// `status.shutdown`, with no restart after it, so in no history entry).
fn last_attempt(status: &AgentStatus, started_at: Option<Time>) -> Attempt {
    let shutdown = status.shutdown.as_ref();
    let ended_at = shutdown.and_then(|s| s.at.clone());
    let ran_for = match (&started_at, &ended_at) {
        (Some(start), Some(end)) => u64::try_from(end.0.duration_since(start.0).as_millis())
            .ok()
            .map(Duration::from_millis),
        _ => None,
    };
    let ended = match shutdown {
        Some(s) => kind(s.kind),
        None => status.phase.map(Phase::as_str).unwrap_or_default(),
    };
    let spend = status
        .spend
        .as_ref()
        .map(|s| &s.current)
        .filter(|c| c.attempt == status.attempt)
        .map(|c| Spend {
            cost: c.cost.clone(),
            tokens: c.tokens,
        });
    Attempt {
        attempt: status.attempt,
        started_at,
        ran_for,
        ended_at,
        ended: ended.to_string(),
        exit_code: None,
        signal: None,
        message: None,
        trigger: None,
        backoff: None,
        restarted_at: None,
        current: shutdown.is_none(),
        checkpoint: status.resumed_from.clone(),
        progress: status.progress.as_ref().map(|p| p.value),
        spend,
        shutdown: shutdown.cloned(),
        stopped: false,
    }
}

fn from_record(r: &RestartRecord) -> Attempt {
    let started_at = match (&r.failed_at, r.ran_for) {
        (Some(end), Some(ran)) => {
            let millis = i64::try_from(ran.as_millis()).unwrap_or(i64::MAX);
            end.0
                .checked_sub(jiff::SignedDuration::from_millis(millis))
                .ok()
                .map(Time)
        }
        _ => None,
    };
    let ended = match (r.reason, r.trigger) {
        (Some(reason), _) => reason.as_str().to_string(),
        (None, trigger) => trigger.as_str().to_string(),
    };
    Attempt {
        attempt: r.attempt,
        started_at,
        ran_for: r.ran_for,
        ended_at: r.failed_at.clone(),
        ended,
        exit_code: r.exit_code,
        signal: r.signal,
        message: r.message.as_deref().map(str::to_string),
        trigger: Some(r.trigger),
        backoff: r.backoff,
        restarted_at: r.restarted_at.clone(),
        current: false,
        checkpoint: r.checkpoint.clone(),
        progress: r.progress,
        spend: r.spend.clone(),
        shutdown: None,
        stopped: false,
    }
}

/// How many characters the timeline takes.
const TIMELINE: usize = 32;

/// The history as a table, oldest attempt first, with a legend.
pub fn render(agent: &Agent, now: Timestamp, paint: Paint) -> String {
    let rows = attempts(agent);
    let name = agent.metadata.name.clone().unwrap_or_default();
    let status = agent.status.clone().unwrap_or_default();
    let mut out = String::new();
    let phase = status.phase.map(Phase::as_str).unwrap_or("Unknown");
    // A Sandbox's attempts are its pods, all named after it.
    let of = match &agent.spec.sandbox_ref {
        Some(sandbox) => format!(" (Sandbox {})", sandbox.name),
        None => String::new(),
    };
    out.push_str(&format!(
        "Agent {name}{of}: {}, attempt {}, {} restarts, {} failures in a row.\n",
        paint.phase(phase),
        status.attempt,
        status.restart_count,
        status.consecutive_failures
    ));
    if rows.is_empty() {
        out.push_str("No attempt has ended yet.\n");
        return out;
    }
    let start = rows
        .iter()
        .filter_map(|a| a.started_at.as_ref().or(a.ended_at.as_ref()))
        .map(|t| t.0)
        .min()
        .unwrap_or(now)
        .min(now);
    let axis = Axis { start, end: now };
    let mut cells: Vec<Vec<String>> = rows
        .iter()
        .map(|a| {
            let how = ending(a);
            let how = if a.current {
                paint.green(&how)
            } else if a.shutdown.is_some() {
                paint.yellow(&how)
            } else if a.ended == FailureReason::Completed.as_str() {
                how
            } else {
                paint.red(&how)
            };
            vec![
                a.attempt.to_string(),
                a.started_at
                    .as_ref()
                    .map(|t| relative(now, t.0))
                    .unwrap_or_else(|| "-".into()),
                match (&a.ran_for, &a.started_at, a.current) {
                    (Some(ran), _, _) => duration(*ran),
                    (None, Some(start), true) => span(now.as_second() - start.0.as_second()),
                    _ => "-".into(),
                },
                how,
                a.backoff.map(duration).unwrap_or_else(|| "-".into()),
                match (&a.restarted_at, a.current) {
                    (_, true) => "-".into(),
                    _ if a.shutdown.is_some() || a.stopped => "none".into(),
                    (Some(_), _) => a
                        .trigger
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    (None, _) => "pending".into(),
                },
                axis.bar(a, paint),
                // Why no restart followed, rather than the last words that said what it spent.
                (a.shutdown.as_ref().and_then(|s| s.reason.as_deref()))
                    .or(a.message.as_deref())
                    .map(|m| one_line(m, 60))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    let mut headers = vec![
        "ATTEMPT", "STARTED", "RAN", "ENDED", "BACKOFF", "RESTART", "TIMELINE", "MESSAGE",
    ];
    // An agent that reports progress or checkpoints: where each attempt resumed, how far it got.
    if rows
        .iter()
        .any(|a| a.checkpoint.is_some() || a.progress.is_some())
    {
        headers.splice(3..3, ["RESUMED FROM", "PROGRESS"]);
        for (row, a) in cells.iter_mut().zip(&rows) {
            let resumed = (a.checkpoint.as_deref())
                .map(|c| one_line(c, 30))
                .unwrap_or_else(|| "-".into());
            let progress = a.progress.map_or_else(|| "-".into(), |p| p.to_string());
            row.splice(3..3, [resumed, progress]);
        }
    }
    // An agent that reports spend: what each attempt spent, as its last report said.
    if rows.iter().any(|a| a.spend.is_some()) {
        let at = headers.len() - 2;
        headers.insert(at, "SPENT");
        for (row, a) in cells.iter_mut().zip(&rows) {
            let at = row.len() - 2;
            row.insert(at, spend::words(a.spend.as_ref(), None));
        }
    }
    out.push_str(&table(&headers, &cells));
    out.push_str(&format!(
        "Timeline: the last {} up to now; {} running, {} waiting to restart.\n",
        span(now.as_second() - start.as_second()),
        paint.green("█"),
        paint.dim("·")
    ));
    if let Some(total) = &status.spend {
        let words = spend::words(
            Some(&Spend {
                cost: total.cost.clone(),
                tokens: total.tokens,
            }),
            None,
        );
        out.push_str(&format!(
            "Spent in all: {words} since {} (each attempt's last report, within the budget's window if it has one).\n",
            relative(now, total.since.0)
        ));
    }
    out
}

/// How an attempt ended, in a few words: `Error (exit 1)`, `Signal 9`, `Manual`, `running`,
/// `Error (exit 1), then Economic shutdown (Budget)`.
fn ending(a: &Attempt) -> String {
    if a.current {
        return a.ended.to_lowercase();
    }
    let failure = match (a.signal, a.exit_code) {
        (Some(signal), _) => format!("{} {signal}", a.ended),
        (None, Some(code)) => format!("{} (exit {code})", a.ended),
        (None, None) => a.ended.clone(),
    };
    let Some(shutdown) = &a.shutdown else {
        return failure;
    };
    let kind = kind(shutdown.kind);
    let by = (shutdown.source.as_deref())
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    if a.ended == kind {
        format!("{kind} shutdown{by}")
    } else {
        format!("{failure}, then {kind} shutdown{by}")
    }
}

fn kind(kind: ShutdownType) -> &'static str {
    match kind {
        ShutdownType::Economic => "Economic",
        ShutdownType::Voluntary => "Voluntary",
    }
}

/// The time axis of the timeline.
struct Axis {
    start: Timestamp,
    end: Timestamp,
}

impl Axis {
    /// The cell a time falls in.
    fn cell(&self, t: Timestamp) -> usize {
        let total = (self.end.as_millisecond() - self.start.as_millisecond()).max(1);
        let at = (t.as_millisecond() - self.start.as_millisecond()).clamp(0, total);
        let cell = (at as f64 / total as f64 * TIMELINE as f64) as usize;
        cell.min(TIMELINE - 1)
    }

    /// The attempt's bar: running from its start to its end, then waiting until its restart.
    fn bar(&self, a: &Attempt, paint: Paint) -> String {
        let mut glyphs = [' '; TIMELINE];
        let ended = a.ended_at.as_ref().map(|t| t.0);
        let started = a.started_at.as_ref().map(|t| t.0).or(ended);
        let Some(started) = started else {
            return String::new();
        };
        let run_end = if a.current {
            self.end
        } else {
            ended.unwrap_or(started)
        };
        let (from, to) = (self.cell(started), self.cell(run_end));
        for g in &mut glyphs[from..=to] {
            *g = '█';
        }
        // A shutdown waits for no restart.
        if !a.current && a.shutdown.is_none() {
            let wait_end = a.restarted_at.as_ref().map(|t| t.0).unwrap_or(self.end);
            let (from, to) = (self.cell(run_end), self.cell(wait_end));
            for g in glyphs.iter_mut().take(to + 1).skip(from + 1) {
                *g = '·';
            }
        }
        let text: String = glyphs.iter().collect();
        let text = text.trim_end().to_string();
        // Colour the two parts apart: the run green, the wait dim.
        let run: String = text.chars().take_while(|c| *c != '·').collect();
        let wait: String = text.chars().skip(run.chars().count()).collect();
        format!("{}{}", paint.green(&run), paint.dim(&wait))
    }
}
