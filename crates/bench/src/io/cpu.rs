//! CPU time as the kernel accounts it: per thread (`schedstat`), per NAPI thread,
//! for this process, and for the whole machine (`/proc/stat`).

/// ns on CPU of this process's threads of family `name` (e.g. every slice's
/// "pepc-data-N"; schedstat: exact, in ns).
pub(super) fn thread_cpu_ns(name: &str) -> u64 {
    schedstat_ns("/proc/self/task", |comm| {
        pepc_node::plan::of_family(comm, name)
    })
}

/// The sum of `/DIR/*/schedstat`'s time on CPU (ns) over the tasks whose name passes.
pub(super) fn schedstat_ns(dir: &str, pick: impl Fn(&str) -> bool) -> u64 {
    let Ok(dir) = std::fs::read_dir(dir) else {
        return 0;
    };
    dir.flatten()
        .filter(|e| {
            pick(
                std::fs::read_to_string(e.path().join("comm"))
                    .unwrap_or_default()
                    .trim(),
            )
        })
        .map(|e| {
            std::fs::read_to_string(e.path().join("schedstat"))
                .unwrap_or_default()
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

/// User and system clock ticks of this process's threads of family `name` (/proc stat).
pub(super) fn thread_user_sys_ticks(name: &str) -> (u64, u64) {
    let mut t = (0, 0);
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return t;
    };
    for e in dir.flatten() {
        let p = e.path();
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        if !pepc_node::plan::of_family(comm.trim(), name) {
            continue;
        }
        let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15.
        let rest = stat.rsplit_once(')').map_or("", |x| x.1);
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        if f.len() > 12 {
            t.0 += f[11];
            t.1 += f[12];
        }
    }
    t
}

/// ns on CPU of the kernel's NAPI threads of devices whose name starts with `prefix`.
pub(super) fn napi_cpu_ns(prefix: &str) -> u64 {
    let want = format!("napi/{prefix}");
    schedstat_ns("/proc", |comm| comm.starts_with(&want))
}

/// ns on CPU of the NAPI threads of the two veth ends `s1u` and `sgi`.
pub(super) fn napi_of(s1u: &str, sgi: &str) -> u64 {
    napi_cpu_ns(&format!("{s1u}-")) + napi_cpu_ns(&format!("{sgi}-"))
}

/// ns of this thread's CPU.
pub(super) fn own_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// All CPUs' busy time so far, ns (from /proc/stat's first line).
pub(super) fn machine_busy_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: u64 = f
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    busy * 1_000_000_000 / hz
}
