//! What machine and file system a result came from: a number without its machine is not a
//! result anyone can compare against.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The machine a benchmark ran on, as recorded in every report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    /// Host name.
    pub hostname: String,
    /// Operating system and kernel release (`Linux 6.1.0-18-amd64`).
    pub kernel: String,
    /// CPU model name from /proc/cpuinfo (empty when unknown).
    pub cpu_model: String,
    /// CPUs this process may use.
    pub cpus: usize,
    /// Total memory in bytes (0 when unknown): the paper's Fig. 1 knee is at client memory size.
    pub memory_bytes: u64,
}

/// Describes this machine. Missing facts are left empty rather than failing the benchmark.
pub fn describe_machine() -> MachineInfo {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpu_model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    let memory_bytes = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024);
    MachineInfo {
        hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
        kernel: format!("{} {}", std::env::consts::OS, read("/proc/sys/kernel/osrelease").trim())
            .trim()
            .to_string(),
        cpu_model,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_bytes,
    }
}

/// The file system type of `path` (`ext4`, `tmpfs`, `nfs`, `fuse`, ...), or its magic number
/// in hex when it is not one we name, or `unknown` when it cannot be asked.
pub fn filesystem_type(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return "unknown".to_string();
    };
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call, and `stat` points
    // to writable memory of the size statfs(2) fills.
    let rc = unsafe { libc::statfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return "unknown".to_string();
    }
    // SAFETY: statfs returned 0, so it initialised the whole struct.
    let magic = unsafe { stat.assume_init() }.f_type as u64;
    let name = match magic {
        0xEF53 => "ext4",
        0x0102_1994 => "tmpfs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x794C_7630 => "overlay",
        0x2FC1_2FC1 => "zfs",
        0x5346_544E => "ntfs",
        0x4D44 => "vfat",
        _ => return format!("{magic:#x}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_has_a_cpu_and_a_kernel() {
        let m = describe_machine();
        assert!(m.cpus >= 1);
        assert!(m.kernel.starts_with(std::env::consts::OS));
    }

    #[test]
    fn proc_is_not_an_ext4_file_system() {
        // /proc is procfs (0x9fa0): not a type we name, so its magic number comes back.
        assert_eq!(filesystem_type(Path::new("/proc")), "0x9fa0");
        assert_eq!(filesystem_type(Path::new("/no/such/directory")), "unknown");
    }
}
