//! What the process uses, read from Linux's `/proc`: resident memory now and at its peak, CPU
//! seconds, and the machine's steal time. Elsewhere each reads as `None`.
//!
//! The peak is the resident high-water mark (`VmHWM`), reset through `/proc/self/clear_refs`
//! so that phases of one process (inference, then training) are measured apart.

/// Resets the peak-RSS counter (Linux ≥ 4.0).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident memory since the last reset, MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Resident memory now, MiB.
pub fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// CPU seconds this process has run (user and system), from `/proc/self/stat`: unlike wall
/// time, it does not grow while the hypervisor runs another guest on our cores.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis (the command may hold spaces);
    // utime and stime are the stat's 14th and 15th fields.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks_per_second())
}

/// Seconds of steal time summed over the machine's CPUs, from `/proc/stat`: time a virtual
/// CPU was ready to run but the hypervisor ran something else. A timing taken while this
/// grows measures the host's neighbours as much as our code.
pub fn steal_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().find(|l| l.starts_with("cpu "))?;
    let steal: f64 = cpu.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal / clock_ticks_per_second())
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the system and touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}
