//! fio job files, as far as the fsperf fragmentation tests use them: the parser, the typed job
//! description, and the volume scaling of `--set scale=`.
//!
//! Every option of the six job files is understood; any other option is an error naming the job
//! and the option, so a job file can never be half-honoured. Units follow fio: sizes in bytes
//! with `K`/`M`/`G` suffixes (base 1024, fio's default `kb_base`), `thinktime` in µs unless
//! suffixed, `runtime` in seconds unless suffixed. A `[global]` section sets defaults for the
//! jobs after it.

use serde::Serialize;
use thiserror::Error;

const KIB: u64 = 1 << 10;
const BLOCK: u64 = 4096;

/// Why a job file could not be used.
#[derive(Debug, Error, PartialEq)]
pub enum JobFileError {
    #[error("{file}: line {line}: {text:?} is neither [section], option=value nor a comment")]
    Syntax {
        file: String,
        line: usize,
        text: String,
    },
    #[error("{file}: job {job}: option {option}={value:?}: {reason}")]
    BadOption {
        file: String,
        job: String,
        option: String,
        value: String,
        reason: String,
    },
    #[error("{file}: job {job}: option {option} is not modelled by the lab")]
    Unsupported {
        file: String,
        job: String,
        option: String,
    },
    #[error("{file}: job {job}: {reason}")]
    BadJob {
        file: String,
        job: String,
        reason: String,
    },
    #[error("scale {scale}: {reason}")]
    BadScale { scale: f64, reason: String },
}

/// fio `ioengine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// `falloc`: each write I/O is `fallocate(fd, 0, offset, bs)`.
    Falloc,
    /// `sync`: each write I/O is a buffered `write()`.
    Sync,
}

/// fio `fallocate=`: what the layout step does to a job's file before the first loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// `native` (fio's default on Linux) or `posix`: one `fallocate(fd, 0, 0, filesize)`.
    Whole,
    /// `none`: the file is only created.
    None,
}

/// One fio job section (`numjobs` copies of it run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSpec {
    pub name: String,
    pub engine: Engine,
    /// `blocksize`: bytes per I/O.
    pub bs: u64,
    /// `filesize`: bytes per file; only whole `bs` I/Os are issued (fio skips a partial tail).
    pub filesize: u64,
    pub numjobs: u32,
    /// `loops` (fio default 1).
    pub loops: u64,
    /// `thinktime`: stall after every I/O, µs.
    pub thinktime_us: u64,
    /// `runtime` without `time_based`: a cap, µs.
    pub runtime_us: Option<u64>,
    /// `unlink`: unlink the file when the job ends.
    pub unlink: bool,
    /// `unlink_each_loop`: unlink the file before every loop after the first.
    pub unlink_each_loop: bool,
    /// `fdatasync=N`: `fdatasync()` after every N writes (0: never).
    pub fdatasync: u64,
    /// `file_append`: writes start at the file's size when it is opened.
    pub file_append: bool,
    /// `create_on_open`: the file is created at first open, not by the layout step.
    pub create_on_open: bool,
    /// `fallocate=` of the layout step.
    pub layout: Layout,
    /// `new_group`, `stats`: reporting only, kept so the description mirrors the file.
    pub new_group: bool,
    pub stats: bool,
}

impl JobSpec {
    fn new(name: &str) -> JobSpec {
        JobSpec {
            name: name.to_string(),
            engine: Engine::Sync,
            bs: 4 * KIB,
            filesize: 0,
            numjobs: 1,
            loops: 1,
            thinktime_us: 0,
            runtime_us: None,
            unlink: false,
            unlink_each_loop: false,
            fdatasync: 0,
            file_append: false,
            create_on_open: false,
            layout: Layout::Whole,
            new_group: false,
            stats: true,
        }
    }

    /// I/Os per loop: whole `bs` pieces of the file (fio's `io_u` past the end is not issued).
    pub fn ios_per_loop(&self) -> u64 {
        self.filesize / self.bs
    }

    /// Whether fio's layout step creates the file before the first loop (and fallocates it
    /// whole under [`Layout::Whole`]): every write job without `create_on_open`
    /// (`setup_files` → `extend_file`).
    pub fn laid_out(&self) -> bool {
        !self.create_on_open
    }

    /// The job with its volumes scaled by `s` the way the scaled job files are made: `filesize`
    /// × s (rounded to 4 KiB), and `bs` with it where `bs == filesize`; every other option is
    /// kept, except that a scaled job has no layout step (`fallocate=none`), as in the scaled
    /// files. `s == 1` returns the job unchanged.
    pub fn scaled(&self, s: f64) -> JobSpec {
        if s == 1.0 {
            return self.clone();
        }
        let filesize = ((self.filesize as f64 * s / BLOCK as f64).round() as u64).max(1) * BLOCK;
        JobSpec {
            bs: if self.bs == self.filesize {
                filesize
            } else {
                self.bs
            },
            filesize,
            layout: Layout::None,
            ..self.clone()
        }
    }
}

/// A parsed job file.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFile {
    pub jobs: Vec<JobSpec>,
}

impl JobFile {
    /// Parses `text`; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<JobFile, JobFileError> {
        let mut global = JobSpec::new("global");
        let mut jobs: Vec<JobSpec> = Vec::new();
        let mut in_global = false;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                in_global = name == "global";
                if !in_global {
                    let mut j = global.clone();
                    j.name = name.to_string();
                    jobs.push(j);
                }
                continue;
            }
            let (key, value) = match line.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => (line, ""),
            };
            let target = match (in_global, jobs.last_mut()) {
                (true, _) => &mut global,
                (false, Some(j)) => j,
                (false, None) => {
                    return Err(JobFileError::Syntax {
                        file: file.to_string(),
                        line: i + 1,
                        text: raw.to_string(),
                    })
                }
            };
            set_option(target, key, value).map_err(|e| e.locate(file, &target.name, key, value))?;
        }
        for j in &jobs {
            j.check().map_err(|reason| JobFileError::BadJob {
                file: file.to_string(),
                job: j.name.clone(),
                reason,
            })?;
        }
        Ok(JobFile { jobs })
    }

    /// Every job scaled by `s` ([`JobSpec::scaled`]); `s` must be in (0, 1].
    pub fn scaled(&self, s: f64) -> Result<JobFile, JobFileError> {
        if !(s > 0.0 && s <= 1.0) {
            return Err(JobFileError::BadScale {
                scale: s,
                reason: "must be in (0, 1]".into(),
            });
        }
        let jobs: Vec<JobSpec> = self.jobs.iter().map(|j| j.scaled(s)).collect();
        if let Some(j) = jobs.iter().find(|j| j.ios_per_loop() == 0) {
            return Err(JobFileError::BadScale {
                scale: s,
                reason: format!(
                    "job {} would have a {} byte file, smaller than its {} byte I/Os",
                    j.name, j.filesize, j.bs
                ),
            });
        }
        Ok(JobFile { jobs })
    }
}

impl JobSpec {
    /// What the lab needs of a job: a write job with at least one whole I/O per loop.
    fn check(&self) -> Result<(), String> {
        if self.filesize == 0 {
            return Err("no filesize".into());
        }
        if self.ios_per_loop() == 0 {
            return Err(format!(
                "filesize {} is smaller than blocksize {}: no I/O",
                self.filesize, self.bs
            ));
        }
        if self.engine == Engine::Falloc && self.fdatasync > 0 {
            return Err("fdatasync with ioengine=falloc".into());
        }
        Ok(())
    }
}

/// An option error before it knows its file and job.
enum OptError {
    Bad(String),
    Unsupported,
}

impl OptError {
    fn locate(self, file: &str, job: &str, option: &str, value: &str) -> JobFileError {
        match self {
            OptError::Bad(reason) => JobFileError::BadOption {
                file: file.to_string(),
                job: job.to_string(),
                option: option.to_string(),
                value: value.to_string(),
                reason,
            },
            OptError::Unsupported => JobFileError::Unsupported {
                file: file.to_string(),
                job: job.to_string(),
                option: option.to_string(),
            },
        }
    }
}

fn set_option(j: &mut JobSpec, key: &str, v: &str) -> Result<(), OptError> {
    match key {
        "ioengine" => {
            j.engine = match v {
                "falloc" => Engine::Falloc,
                "sync" | "psync" => Engine::Sync,
                _ => return Err(OptError::Unsupported),
            }
        }
        "rw" | "readwrite" if v == "write" => {}
        "rw" | "readwrite" => return Err(OptError::Bad("only rw=write is modelled".into())),
        "blocksize" | "bs" => j.bs = positive(size(v)?)?,
        "filesize" => j.filesize = positive(size(v)?)?,
        "numjobs" => {
            j.numjobs = u32::try_from(positive(int(v)?)?)
                .map_err(|_| OptError::Bad("too many jobs".into()))?
        }
        "loops" => j.loops = positive(int(v)?)?,
        "thinktime" => j.thinktime_us = time_us(v, 1)?,
        "runtime" => j.runtime_us = Some(positive(time_us(v, 1_000_000)?)?),
        "unlink" => j.unlink = flag(v)?,
        "unlink_each_loop" => j.unlink_each_loop = flag(v)?,
        "fdatasync" => j.fdatasync = int(v)?,
        "file_append" => j.file_append = flag(v)?,
        "create_on_open" => j.create_on_open = flag(v)?,
        "fallocate" => {
            j.layout = match v {
                "none" | "0" => Layout::None,
                "native" | "posix" | "1" => Layout::Whole,
                _ => return Err(OptError::Unsupported),
            }
        }
        "new_group" => j.new_group = flag(v)?,
        "stats" => j.stats = flag(v)?,
        _ => return Err(OptError::Unsupported),
    }
    Ok(())
}

fn int(v: &str) -> Result<u64, OptError> {
    v.parse()
        .map_err(|_| OptError::Bad("expected an integer".into()))
}

fn positive(n: u64) -> Result<u64, OptError> {
    if n == 0 {
        Err(OptError::Bad("must be positive".into()))
    } else {
        Ok(n)
    }
}

/// `1`/`0` (a bare option is `1`).
fn flag(v: &str) -> Result<bool, OptError> {
    match v {
        "" | "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(OptError::Bad("expected 0 or 1".into())),
    }
}

/// Bytes: digits with an optional K/M/G/T suffix (base 1024).
fn size(v: &str) -> Result<u64, OptError> {
    let upper = v.to_ascii_uppercase();
    let (digits, mult) = match upper.trim_end_matches(['B', 'I']).chars().last() {
        Some('K') => (&upper[..upper.find('K').unwrap_or(0)], KIB),
        Some('M') => (&upper[..upper.find('M').unwrap_or(0)], KIB << 10),
        Some('G') => (&upper[..upper.find('G').unwrap_or(0)], KIB << 20),
        Some('T') => (&upper[..upper.find('T').unwrap_or(0)], KIB << 30),
        _ => (upper.as_str(), 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| OptError::Bad("expected a size such as 128K, 8M or 1G".into()))
}

/// A time in µs: digits with an optional `us`/`ms`/`s`/`m` suffix, else `unit_us` per unit.
fn time_us(v: &str, unit_us: u64) -> Result<u64, OptError> {
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, suffix) = v.split_at(split);
    let mult = match suffix {
        "" => unit_us,
        "us" => 1,
        "ms" => 1_000,
        "s" => 1_000_000,
        "m" => 60_000_000,
        _ => return Err(OptError::Bad("expected a time such as 1ms or 20s".into())),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| OptError::Bad("expected a time such as 1ms or 20s".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_fio() {
        assert_eq!(size("128K").ok(), Some(128 << 10));
        assert_eq!(size("129M").ok(), Some(129 << 20));
        assert_eq!(size("2G").ok(), Some(2 << 30));
        assert_eq!(size("4096").ok(), Some(4096));
        assert!(size("12Q").is_err());
        assert_eq!(time_us("500ms", 1).ok(), Some(500_000));
        assert_eq!(time_us("1ms", 1).ok(), Some(1000));
        assert_eq!(time_us("20s", 1_000_000).ok(), Some(20_000_000));
        assert_eq!(time_us("20", 1_000_000).ok(), Some(20_000_000));
        assert_eq!(time_us("250", 1).ok(), Some(250));
        assert!(time_us("2h", 1).is_err());
    }

    #[test]
    fn unknown_options_and_bad_values_are_errors_naming_them() {
        let e = JobFile::parse("t.fio", "[a]\nioengine=falloc\ndirect=1\n").unwrap_err();
        assert!(
            matches!(&e, JobFileError::Unsupported { job, option, .. } if job == "a" && option == "direct"),
            "{e}"
        );
        let e = JobFile::parse("t.fio", "[a]\nblocksize=12Q\n").unwrap_err();
        assert!(e.to_string().contains("12Q"), "{e}");
        let e = JobFile::parse("t.fio", "[a]\nbs=1M\nfilesize=512K\n").unwrap_err();
        assert!(matches!(e, JobFileError::BadJob { .. }), "{e}");
        assert!(JobFile::parse("t.fio", "bs=1M\n").is_err());
    }

    #[test]
    fn global_options_are_defaults() {
        let f = JobFile::parse(
            "t.fio",
            "[global]\nioengine=falloc\nloops=3\n[a]\nbs=1M\nfilesize=4M\n[b]\nbs=1M\nfilesize=1M\nloops=1\n",
        )
        .unwrap();
        assert_eq!(f.jobs.len(), 2);
        assert_eq!((f.jobs[0].engine, f.jobs[0].loops), (Engine::Falloc, 3));
        assert_eq!(f.jobs[0].ios_per_loop(), 4);
        assert_eq!(f.jobs[1].loops, 1);
    }

    #[test]
    fn scaling_halves_files_and_whole_file_calls_only() {
        let f = JobFile::parse(
            "t.fio",
            "[big]\nioengine=falloc\nbs=2G\nfilesize=2G\n[med]\nioengine=falloc\nbs=9M\nfilesize=1G\n",
        )
        .unwrap();
        let h = f.scaled(0.5).unwrap();
        assert_eq!((h.jobs[0].bs, h.jobs[0].filesize), (1 << 30, 1 << 30));
        assert_eq!((h.jobs[1].bs, h.jobs[1].filesize), (9 << 20, 512 << 20));
        assert_eq!(h.jobs[1].ios_per_loop(), 56);
        assert_eq!(h.jobs[0].layout, Layout::None);
        assert_eq!(f.scaled(1.0).unwrap(), f);
        assert!(f.scaled(0.0).is_err() && f.scaled(1.5).is_err());
        assert!(matches!(
            f.scaled(0.001),
            Err(JobFileError::BadScale { .. })
        ));
    }
}
