//! Failure fingerprints: what normalisation takes out (a table), and that a fingerprint is the
//! same under every such substitution and differs between failures (properties).

use agent_supervisor::api::FailureReason;
use agent_supervisor::supervise::fingerprint::{fingerprint, normalize};
use proptest::prelude::*;

#[test]
fn normalisation_takes_out_what_varies() {
    let table = [
        (
            "took 1532 ms, attempt 3 of 5",
            "took <n> ms, attempt <n> of <n>",
        ),
        ("status 503.25 after 0.5s", "status <n> after <n>s"),
        (
            "request 3f2a9c1e-77b0-4c1d-9e8f-0123456789ab failed",
            "request <uuid> failed",
        ),
        (
            "request 3F2A9C1E-77B0-4C1D-9E8F-0123456789AB failed",
            "request <uuid> failed",
        ),
        ("object 0xdeadBEEF freed twice", "object <hex> freed twice"),
        ("commit a1b2c3d is bad", "commit <id> is bad"),
        ("trace 4bf92f3577b34da6a3ce929d0e0e4736", "trace <id>"),
        ("session sess_AbC123xYz9Qw expired", "session <id> expired"),
        (
            "worker-3 and worker-12 disagree",
            "worker-<n> and worker-<n> disagree",
        ),
        ("dial tcp 10.0.3.17:443: refused", "dial tcp <ip>: refused"),
        (
            "dial tcp [2001:db8::8a2e:370:7334]:443: refused",
            "dial tcp <ip>: refused",
        ),
        ("dial tcp [::1]:8080: refused", "dial tcp <ip>: refused"),
        ("no route to fe80::1ff:fe23:4567:890a", "no route to <ip>"),
        (
            "at 2026-11-22T10:15:03.123Z the lease",
            "at <time> the lease",
        ),
        (
            "at 2026-11-22T10:15:03+01:00 the lease",
            "at <time> the lease",
        ),
        ("at 2026-11-22 10:15:03 the lease", "at <time> the lease"),
        ("on 2026-11-22 it broke", "on <time> it broke"),
        (
            "Date: Tue, 01 Jul 2025 10:00:00 GMT",
            "Date: <time> <time> GMT",
        ),
        ("since 10:15:03.5 nothing", "since <time> nothing"),
        (
            "GET /v1/users/48213/tasks/9f8e7d6c: 404",
            "GET /<id>/users/<id>/tasks/<id>: <n>",
        ),
        (
            "open /data/runs/run-2291/out.json",
            "open /data/runs/<id>/out.json",
        ),
        ("  many\n\tspaces   here ", "many spaces here"),
        // What does not vary stays: words, paths without ids, code paths.
        ("std::io::Error: broken pipe", "std::io::Error: broken pipe"),
        ("Bad::Thing happened", "Bad::Thing happened"),
        ("open /etc/agent/config.yaml", "open /etc/agent/config.yaml"),
    ];
    for (message, want) in table {
        assert_eq!(normalize(message, &[]), want, "normalising {message:?}");
    }
}

#[test]
fn the_agents_own_names_are_taken_out() {
    let a = normalize(
        "researcher-a-7 (agent researcher-a) lost its tool server",
        &["researcher-a-7", "researcher-a"],
    );
    let b = normalize(
        "writer-2 (agent writer) lost its tool server",
        &["writer-2", "writer"],
    );
    assert_eq!(a, "<name> (agent <name>) lost its tool server");
    assert_eq!(a, b);
}

#[test]
fn names_are_taken_out_as_whole_words_only() {
    // Short names that occur inside ids and words: only the names themselves are taken out.
    let table: [(&str, &[&str], &str); 7] = [
        (
            "timeout after 1234 ms talking to 10.0.0.7 req 8f14e45f-ceea-467f-a0e6-5f8b2c3d1a9e",
            &["f1-3", "f1"],
            "timeout after <n> ms talking to <ip> req <uuid>",
        ),
        (
            "connection failed: ed-2 reached ed's limit",
            &["ed-2", "ed"],
            "connection failed: <name> reached <name>'s limit",
        ),
        (
            "refused to feed the model",
            &["ed"],
            "refused to feed the model",
        ),
        ("ab_cache ab2 cab ab", &["ab"], "ab_cache ab<n> cab <name>"),
        (
            "at 10:15:03 from [ab::1]:80",
            &["ab"],
            "at <time> from <ip>",
        ),
        // A placeholder's word is not a name, even when an agent has it for one.
        ("dial 10.0.0.1: ip down", &["ip"], "dial <ip>: <name> down"),
        (
            "lease researcher-heartbeat of researcher expired",
            &["researcher"],
            "lease <name>-heartbeat of <name> expired",
        ),
    ];
    for (message, names, want) in table {
        assert_eq!(normalize(message, names), want, "normalising {message:?}");
    }
}

#[test]
fn one_failure_on_agents_whose_names_occur_inside_ids_is_one_fingerprint() {
    let f1 = fingerprint(
        FailureReason::Error,
        Some(1),
        Some("timeout after 1234 ms talking to 10.0.0.7 req 8f14e45f-ceea-467f-a0e6-5f8b2c3d1a9e"),
        &["f1-3", "f1"],
    );
    let f2 = fingerprint(
        FailureReason::Error,
        Some(1),
        Some("timeout after 99 ms talking to 10.0.0.9 req 1c2d3e4f-aaaa-bbbb-cccc-1234567890ab"),
        &["f2-8", "f2"],
    );
    assert_eq!(f1, f2);
    let ed = fingerprint(
        FailureReason::Error,
        Some(1),
        Some("upstream failed"),
        &["ed-1", "ed"],
    );
    let al = fingerprint(
        FailureReason::Error,
        Some(1),
        Some("upstream failed"),
        &["al-1", "al"],
    );
    assert_eq!(ed, al, "`ed` is not taken out of `failed`");
}

#[test]
fn reason_exit_code_and_message_all_count() {
    let base = fingerprint(FailureReason::Error, Some(1), Some("provider 503"), &[]);
    assert_eq!(base.len(), 16);
    assert!(
        base.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
    assert_eq!(
        base,
        fingerprint(FailureReason::Error, Some(1), Some("provider 500"), &[])
    );
    assert_ne!(
        base,
        fingerprint(FailureReason::OomKilled, Some(1), Some("provider 503"), &[])
    );
    assert_ne!(
        base,
        fingerprint(FailureReason::Error, Some(2), Some("provider 503"), &[])
    );
    assert_ne!(
        base,
        fingerprint(FailureReason::Error, None, Some("provider 503"), &[])
    );
    assert_ne!(
        base,
        fingerprint(FailureReason::Error, Some(1), Some("database 503"), &[])
    );
    assert_ne!(base, fingerprint(FailureReason::Error, Some(1), None, &[]));
}

/// How many kinds of variable parts [`variable`] makes.
const KINDS: u8 = 9;

/// A piece of a message that varies between occurrences of one failure: of kind `kind`, drawn
/// from `seed`.
fn variable(kind: u8, seed: u128) -> String {
    let n = seed as u64;
    let b = seed.to_le_bytes();
    match kind {
        0 => (n as u32).to_string(),
        1 => format!("{}.{}", n as u16, (n >> 16) as u16 % 1000),
        2 => {
            let h = format!("{seed:032x}");
            format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            )
        }
        3 => format!("0x{n:x}"),
        // A commit-like id: hex with at least one letter and one digit.
        4 => format!("a{:08x}1", n as u32),
        5 => match (n >> 32) as u16 {
            0 => format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]),
            port => format!("{}.{}.{}.{}:{port}", b[0], b[1], b[2], b[3]),
        },
        6 => format!(
            "[{:x}:{:x}:{:x}:{:x}:{:x}:{:x}:{:x}:1]:443",
            u16::from_le_bytes([b[0], b[1]]),
            u16::from_le_bytes([b[2], b[3]]),
            u16::from_le_bytes([b[4], b[5]]),
            u16::from_le_bytes([b[6], b[7]]),
            u16::from_le_bytes([b[8], b[9]]),
            u16::from_le_bytes([b[10], b[11]]),
            u16::from_le_bytes([b[12], b[13]]),
        ),
        7 => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            1900 + n % 200,
            1 + (n >> 8) % 12,
            1 + (n >> 12) % 28,
            (n >> 17) % 24,
            (n >> 22) % 60,
            (n >> 28) % 60,
            (n >> 34) % 1000
        ),
        _ => format!("/api/users/{}/tasks/{}", n as u32, (n >> 32) as u16),
    }
}

/// Words from a small vocabulary: no digits, so a template's fixed parts never look variable.
fn arb_words() -> impl Strategy<Value = Vec<&'static str>> {
    const WORDS: [&str; 16] = [
        "provider",
        "returned",
        "timeout",
        "while",
        "calling",
        "the",
        "model",
        "tool",
        "server",
        "refused",
        "connection",
        "rate",
        "limited",
        "upstream",
        "error:",
        "retry",
    ];
    proptest::collection::vec(proptest::sample::select(&WORDS[..]), 1..8)
}

/// An agent name of two or three characters: a piece of a word of [`arb_words`] (never a whole
/// one), or hex that an id may start with.
fn short_name() -> impl Strategy<Value = String> {
    const PIECES: [&str; 12] = [
        "ed", "er", "ro", "at", "im", "ou", "se", "ti", "rat", "ver", "ode", "lim",
    ];
    prop_oneof![
        proptest::sample::select(&PIECES[..]).prop_map(str::to_string),
        "[a-f][a-f0-9]{1,2}",
    ]
}

fn fill(words: &[&str], slots: &[String]) -> String {
    let mut parts = Vec::new();
    for (i, w) in words.iter().enumerate() {
        parts.push(w.to_string());
        if let Some(v) = slots.get(i) {
            parts.push(v.clone());
        }
    }
    parts.join(" ")
}

proptest! {
    #[test]
    fn stable_under_what_varies(
        words in arb_words(),
        slots in proptest::collection::vec((0..KINDS, any::<u128>(), any::<u128>()), 8),
        code in proptest::option::of(1i32..256),
    ) {
        // The same template, each slot filled twice with a variable part of the same kind.
        let first: Vec<String> = slots.iter().map(|(k, a, _)| variable(*k, *a)).collect();
        let second: Vec<String> = slots.iter().map(|(k, _, b)| variable(*k, *b)).collect();
        let a = fill(&words, &first);
        let b = fill(&words, &second);
        prop_assert_eq!(
            fingerprint(FailureReason::Error, code, Some(&a), &[]),
            fingerprint(FailureReason::Error, code, Some(&b), &[]),
            "{:?} and {:?}", a, b
        );
    }

    #[test]
    fn different_failures_differ(
        a in arb_words(),
        b in arb_words(),
        slots in proptest::collection::vec((0..KINDS, any::<u128>()), 8),
    ) {
        prop_assume!(a != b);
        let slots: Vec<String> = slots.iter().map(|(k, seed)| variable(*k, *seed)).collect();
        let (ma, mb) = (fill(&a, &slots), fill(&b, &slots));
        prop_assume!(normalize(&ma, &[]) != normalize(&mb, &[]));
        prop_assert_ne!(
            fingerprint(FailureReason::Error, Some(1), Some(&ma), &[]),
            fingerprint(FailureReason::Error, Some(1), Some(&mb), &[])
        );
    }

    #[test]
    fn short_names_inside_ids_and_words_change_no_fingerprint(
        words in arb_words(),
        slots in proptest::collection::vec((0..KINDS, any::<u128>(), any::<u128>()), 8),
        names in (short_name(), short_name()),
        ids in (any::<u128>(), any::<u128>()),
    ) {
        // One failure on two agents: the same template, each slot filled differently, a
        // request id that starts with the agent's name when the name could start one, and the
        // agent named as a word of its own. Names are pieces of the template's words, or hex.
        let (a, b) = names;
        let message = |name: &str, pick: fn(&(u8, u128, u128)) -> u128, id: u128| {
            let filled: Vec<String> = slots.iter().map(|s| variable(s.0, pick(s))).collect();
            let mut hex = format!("{id:032x}");
            if name.bytes().all(|c| c.is_ascii_hexdigit()) {
                hex.replace_range(..name.len(), name);
            }
            let uuid = format!(
                "{}-{}-{}-{}-{}",
                &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]
            );
            format!("{} req {uuid} (agent {name})", fill(&words, &filled))
        };
        let ma = message(&a, |s| s.1, ids.0);
        let mb = message(&b, |s| s.2, ids.1);
        prop_assert_eq!(
            fingerprint(FailureReason::Error, Some(1), Some(&ma), &[&a]),
            fingerprint(FailureReason::Error, Some(1), Some(&mb), &[&b]),
            "{:?} and {:?}", ma, mb
        );
    }

    #[test]
    fn never_panics(message in ".{0,300}", names in proptest::collection::vec("[a-z0-9-]{0,12}", 0..3)) {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let f = fingerprint(FailureReason::Unknown, None, Some(&message), &names);
        prop_assert_eq!(f.len(), 16);
    }
}
