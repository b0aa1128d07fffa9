//! CPU time of the processes under test, from `/proc/PID/stat` (Linux).
//!
//! Read at the start and the end of the measured window, by the same
//! program that draws the window, so the CPU and the requests counted cover
//! the same period. The unit is the kernel's clock tick (`getconf CLK_TCK`,
//! usually 100 per second); the caller converts.

use std::str::FromStr;

use anyhow::{bail, Context as _};

/// Processes whose CPU is reported together under one name (e.g. an nginx
/// master and its workers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuGroup {
    pub name: String,
    pub pids: Vec<u32>,
}

impl FromStr for CpuGroup {
    type Err = String;

    /// `NAME=PID[,PID...]`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, pids) = s
            .split_once('=')
            .ok_or_else(|| format!("expected NAME=PID[,PID...], got {s:?}"))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "bad group name {name:?} (letters, digits, - and _)"
            ));
        }
        let pids = pids
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or_else(|| format!("bad pid {p:?} in {s:?}"))
            })
            .collect::<Result<Vec<u32>, String>>()?;
        Ok(Self {
            name: name.to_owned(),
            pids,
        })
    }
}

/// utime + stime (fields 14 and 15) of one `/proc/PID/stat` line, in clock
/// ticks. The command name (field 2) may hold spaces and parentheses, so
/// fields are counted from the last `)`.
pub fn stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state is field 3, so utime (14) is the 12th from here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The group's ticks so far, summed over its processes.
pub fn sample(group: &CpuGroup) -> anyhow::Result<u64> {
    let mut total = 0;
    for pid in &group.pids {
        let path = format!("/proc/{pid}/stat");
        let stat = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {path} ({} is gone?)", group.name))?;
        match stat_ticks(&stat) {
            Some(t) => total += t,
            None => bail!("unexpected {path}: {stat:?}"),
        }
    }
    Ok(total)
}

/// [`sample`] for every group.
pub fn sample_all(groups: &[CpuGroup]) -> anyhow::Result<Vec<u64>> {
    groups.iter().map(sample).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_counted_after_the_command_name() {
        let line = "4242 (gate way) (x)) S 1 4242 4242 0 -1 4194560 2043 0 0 0 \
                    150 27 0 0 20 0 9 0 12345 123456789 4000 18446744073709551615";
        assert_eq!(stat_ticks(line), Some(177));
        assert_eq!(stat_ticks("1 (init) S 0 1"), None);
        assert_eq!(stat_ticks("no name here"), None);
    }

    #[test]
    fn own_process_can_be_sampled() {
        let me = CpuGroup {
            name: "self".into(),
            pids: vec![std::process::id()],
        };
        assert!(sample(&me).is_ok());
        let gone = CpuGroup {
            name: "gone".into(),
            pids: vec![u32::MAX],
        };
        assert!(sample(&gone).is_err());
    }

    #[test]
    fn groups_parse() {
        let g: CpuGroup = "nginx=1,22, 333".parse().expect("parse");
        assert_eq!((g.name.as_str(), g.pids), ("nginx", vec![1, 22, 333]));
        for bad in ["nginx", "=1", "a b=1", "x=", "x=1,,2", "x=0", "x=-1"] {
            assert!(bad.parse::<CpuGroup>().is_err(), "{bad}");
        }
    }
}
