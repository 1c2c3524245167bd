//! Damaged captures: a stored case with random values, lines or bytes changed must load with a
//! typed error or replay to a report, never panic (tests build with overflow checks on, so an
//! unchecked addition on a hostile number fails here too).
//!
//! The mutations start from real captures (three 1 GiB cases: fallocate, buffered writes
//! with preallocations, an aged file system) so that about half of them still load and drive
//! the allocator down its real paths with odd requests: arbitrary flags, goals and lengths out
//! of range, frees of what was never allocated, records out of order, commits of transactions
//! that never began, final states that name blocks outside their group.

use std::fs;
use std::path::{Path, PathBuf};

use mballoc_lab::case::{Case, FINAL_STATE, INITIAL_STATE, META, RECORDS};
use mballoc_lab::replay::replay_case;
use proptest::prelude::*;
use serde_json::Value;

const SOURCES: [&str; 3] = ["falloc-1g-mixed", "bufwrite-1g", "aged-1g-bufwrite"];

/// The source case's four files, parsed once.
struct Source {
    initial: Value,
    meta: Value,
    records: Vec<Value>,
    final_state: Value,
}

impl Source {
    fn load(name: &str) -> Source {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../kernel-cases")
            .join(name);
        let read = |file: &str| fs::read_to_string(dir.join(file)).unwrap();
        let json = |file: &str| serde_json::from_str(&read(file)).unwrap();
        Source {
            initial: json(INITIAL_STATE),
            meta: json(META),
            records: read(RECORDS)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            final_state: json(FINAL_STATE),
        }
    }
}

/// Source case `i` of [`SOURCES`], parsed once.
fn source(i: usize) -> &'static Source {
    static PARSED: std::sync::OnceLock<Vec<Source>> = std::sync::OnceLock::new();
    &PARSED.get_or_init(|| SOURCES.iter().map(|n| Source::load(n)).collect())[i]
}

/// Which document a mutation changes.
#[derive(Debug, Clone, Copy)]
enum Doc {
    Initial,
    Meta,
    Records,
    Final,
}

/// One change to the case.
#[derive(Debug, Clone)]
enum Mutation {
    /// The `pick`-th scalar (counted over the document) becomes `value`.
    Scalar {
        doc: Doc,
        pick: usize,
        value: Odd,
    },
    /// The `pick`-th unsigned number other than a `seq` changes in a way that still parses
    /// most of the time, so that the case loads and the allocator meets the odd value.
    Number {
        doc: Doc,
        pick: usize,
        to: Num,
    },
    /// A record line is removed, doubled or moved (and the lines renumbered).
    DropLine(usize),
    DupLine(usize),
    SwapLines(usize, usize),
    /// The records file is cut `cut` bytes before its end (a torn last line).
    Truncate(usize),
    /// One byte of a serialised document is replaced.
    Byte {
        doc: Doc,
        at: usize,
        byte: u8,
    },
}

/// The replacement values that find overflow and range bugs.
#[derive(Debug, Clone)]
enum Odd {
    Int(i128),
    Neighbour(i8),
    Doubled,
    Text(&'static str),
    Null,
    Bool(bool),
}

/// A change to an unsigned number that keeps it unsigned.
#[derive(Debug, Clone)]
enum Num {
    Set(u64),
    Add(i8),
    Double,
    Halve,
    FlipBit(u8),
}

fn num() -> impl Strategy<Value = Num> {
    prop_oneof![
        prop::sample::select(vec![0u64, 1, 2, 255, 1 << 15, 1 << 31, u64::from(u32::MAX)])
            .prop_map(Num::Set),
        (0u64..1 << 20).prop_map(Num::Set),
        (-3i8..=3).prop_map(Num::Add),
        Just(Num::Double),
        Just(Num::Halve),
        (0u8..34).prop_map(Num::FlipBit),
    ]
}

fn odd() -> impl Strategy<Value = Odd> {
    prop_oneof![
        prop::sample::select(vec![
            0i128,
            1,
            -1,
            i128::from(i32::MAX),
            1 << 31,
            (1 << 32) - 1,
            1 << 32,
            i128::from(i64::MAX),
            i128::from(i64::MIN),
            i128::from(u64::MAX),
        ])
        .prop_map(Odd::Int),
        any::<i128>().prop_map(|v| Odd::Int(v % (1i128 << 70))),
        (-3i8..=3).prop_map(Odd::Neighbour),
        Just(Odd::Doubled),
        prop::sample::select(vec!["", "x", "scan", "pa", "end_commit", "==", "AAAA"])
            .prop_map(Odd::Text),
        Just(Odd::Null),
        any::<bool>().prop_map(Odd::Bool),
    ]
}

fn doc() -> impl Strategy<Value = Doc> {
    prop_oneof![
        1 => Just(Doc::Initial),
        1 => Just(Doc::Meta),
        6 => Just(Doc::Records),
        2 => Just(Doc::Final),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (doc(), any::<usize>(), odd())
            .prop_map(|(doc, pick, value)| Mutation::Scalar { doc, pick, value }),
        8 => (doc(), any::<usize>(), num())
            .prop_map(|(doc, pick, to)| Mutation::Number { doc, pick, to }),
        1 => any::<usize>().prop_map(Mutation::DropLine),
        1 => any::<usize>().prop_map(Mutation::DupLine),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        1 => (1usize..400).prop_map(Mutation::Truncate),
        1 => (doc(), any::<usize>(), any::<u8>())
            .prop_map(|(doc, at, byte)| Mutation::Byte { doc, at, byte }),
    ]
}

/// The case as documents, then as text (byte mutations work on the text).
struct Damaged {
    initial: Value,
    meta: Value,
    records: Vec<Value>,
    final_state: Value,
    texts: Option<[String; 4]>,
}

impl Damaged {
    fn new(i: usize) -> Damaged {
        let s = source(i);
        Damaged {
            initial: s.initial.clone(),
            meta: s.meta.clone(),
            records: s.records.clone(),
            final_state: s.final_state.clone(),
            texts: None,
        }
    }

    /// The four files as text, serialised at the first textual change.
    fn texts(&mut self) -> &mut [String; 4] {
        if self.texts.is_none() {
            let lines: Vec<String> = self.records.iter().map(Value::to_string).collect();
            self.texts = Some([
                self.initial.to_string(),
                self.meta.to_string(),
                lines.join("\n") + "\n",
                self.final_state.to_string(),
            ]);
        }
        self.texts.as_mut().expect("just set")
    }

    /// The document a value mutation changes: a whole file, or for the records any line
    /// (`pick` chooses it, then `pick / lines` the value in it, so every record gets its share).
    fn target(&mut self, doc: Doc, pick: usize) -> Option<&mut Value> {
        let n = self.records.len().max(1);
        match doc {
            Doc::Initial => Some(&mut self.initial),
            Doc::Meta => Some(&mut self.meta),
            Doc::Final => Some(&mut self.final_state),
            Doc::Records => self.records.get_mut(pick % n),
        }
    }

    fn apply(&mut self, m: &Mutation) {
        if self.texts.is_some() && !matches!(m, Mutation::Byte { .. } | Mutation::Truncate(_)) {
            return; // Structured changes only before the first textual one.
        }
        let n = self.records.len().max(1);
        match m {
            Mutation::Scalar { doc, pick, value } => {
                let mut leaves = Vec::new();
                if let Some(v) = self.target(*doc, *pick) {
                    scalars(v, &mut leaves);
                }
                if !leaves.is_empty() {
                    let k = leaves.len();
                    replace(leaves.swap_remove(pick / n % k), value);
                }
            }
            Mutation::Number { doc, pick, to } => {
                let mut leaves = Vec::new();
                if let Some(v) = self.target(*doc, *pick) {
                    numbers(v, "", &mut leaves);
                }
                if !leaves.is_empty() {
                    let k = leaves.len();
                    let leaf = leaves.swap_remove(pick / n % k);
                    let cur = leaf.as_u64().unwrap_or(0);
                    *leaf = Value::from(match to {
                        Num::Set(v) => *v,
                        Num::Add(d) => cur.saturating_add_signed(i64::from(*d)),
                        Num::Double => cur.saturating_mul(2),
                        Num::Halve => cur / 2,
                        Num::FlipBit(b) => cur ^ (1 << b),
                    });
                }
            }
            Mutation::DropLine(i) if !self.records.is_empty() => {
                self.records.remove(i % n);
            }
            Mutation::DupLine(i) if !self.records.is_empty() => {
                let l = self.records[i % n].clone();
                self.records.insert(i % n, l);
            }
            Mutation::SwapLines(a, b) if !self.records.is_empty() => {
                self.records.swap(a % n, b % n);
            }
            Mutation::Truncate(cut) => {
                let t = &mut self.texts()[2];
                let keep = t.len().saturating_sub(*cut);
                let keep = (0..=keep)
                    .rev()
                    .find(|&i| t.is_char_boundary(i))
                    .unwrap_or(0);
                t.truncate(keep);
            }
            Mutation::Byte { doc, at, byte } => {
                let i = *doc as usize;
                let t = std::mem::take(&mut self.texts()[i]);
                let mut bytes = t.into_bytes();
                if !bytes.is_empty() {
                    let k = at % bytes.len();
                    bytes[k] = *byte;
                }
                self.texts()[i] = String::from_utf8_lossy(&bytes).into_owned();
            }
            _ => {}
        }
        if matches!(
            m,
            Mutation::DropLine(_) | Mutation::DupLine(_) | Mutation::SwapLines(..)
        ) {
            // Renumbered, so the case still loads and replays its records in the new order
            // (a `seq` that is not the line number has its own unit test).
            for (i, r) in self.records.iter_mut().enumerate() {
                if let Some(seq) = r.get_mut("seq") {
                    *seq = Value::from(i as u64 + 1);
                }
            }
        }
    }

    fn write(mut self, dir: &Path) {
        let [initial, meta, records, final_state] = self.texts().clone();
        fs::write(dir.join(INITIAL_STATE), initial).unwrap();
        fs::write(dir.join(META), meta).unwrap();
        fs::write(dir.join(RECORDS), records).unwrap();
        fs::write(dir.join(FINAL_STATE), final_state).unwrap();
    }
}

/// Every scalar leaf (number, string, bool, null) of `v`, in document order.
fn scalars<'a>(v: &'a mut Value, out: &mut Vec<&'a mut Value>) {
    match v {
        Value::Array(a) => a.iter_mut().for_each(|x| scalars(x, out)),
        Value::Object(o) => o.values_mut().for_each(|x| scalars(x, out)),
        leaf => out.push(leaf),
    }
}

/// Every unsigned-integer leaf of `v` except record sequence numbers (`key` is the field
/// holding `v`).
fn numbers<'a>(v: &'a mut Value, key: &str, out: &mut Vec<&'a mut Value>) {
    match v {
        Value::Array(a) => a.iter_mut().for_each(|x| numbers(x, key, out)),
        Value::Object(o) => o.iter_mut().for_each(|(k, x)| numbers(x, k, out)),
        leaf if leaf.is_u64() && key != "seq" => out.push(leaf),
        _ => {}
    }
}

fn replace(leaf: &mut Value, odd: &Odd) {
    let int = |v: i128| {
        if let Ok(u) = u64::try_from(v) {
            Value::from(u)
        } else if let Ok(i) = i64::try_from(v) {
            Value::from(i)
        } else {
            Value::from(v as f64)
        }
    };
    let cur = leaf
        .as_i64()
        .map(i128::from)
        .or(leaf.as_u64().map(i128::from));
    *leaf = match odd {
        Odd::Int(v) => int(*v),
        Odd::Neighbour(d) => int(cur.unwrap_or(0) + i128::from(*d)),
        Odd::Doubled => int(cur.unwrap_or(1) * 2),
        Odd::Text(s) => Value::from(*s),
        Odd::Null => Value::Null,
        Odd::Bool(b) => Value::from(*b),
    };
}

/// Loads and replays the damaged case; any panic fails the property.
fn load_and_replay(dir: &Path) {
    let Ok(case) = Case::load(dir) else { return };
    let _ = case.check_counts();
    if let Ok(rep) = replay_case(&case) {
        assert!(rep.matched <= rep.allocs);
    }
}

#[test]
fn the_source_cases_replay_unchanged() {
    // The control: with no mutation each case loads and every placement matches, so the
    // property below starts from cases that reach the allocator's real paths.
    for (i, name) in SOURCES.iter().enumerate() {
        let tmp = tempfile::tempdir().unwrap();
        Damaged::new(i).write(tmp.path());
        let case = Case::load(tmp.path()).unwrap();
        let rep = replay_case(&case).unwrap();
        assert_eq!(rep.matched, rep.allocs, "{name}");
        assert!(rep.allocs >= 80, "{name}: {} allocations", rep.allocs);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_damaged_case_is_an_error_or_a_report_never_a_panic(
        src in 0..SOURCES.len(),
        muts in prop::collection::vec(mutation(), 1..6)
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let mut d = Damaged::new(src);
        for m in &muts {
            d.apply(m);
        }
        d.write(tmp.path());
        load_and_replay(tmp.path());
    }
}
