//! How `ls -l` and `stat` print attributes: `drwxr-xr-x` mode strings,
//! type names, and times in the local zone.

use eagernfs_proto::nfs3::{Ftype3, Nfstime3};

/// The ten-character mode string `ls -l` prints (`-rw-r--r--`,
/// `drwxrwxrwt`, `-rwsr-xr-x`).
pub(crate) fn mode_string(ftype: Ftype3, mode: u32) -> String {
    let kind = match ftype {
        Ftype3::Reg => '-',
        Ftype3::Dir => 'd',
        Ftype3::Blk => 'b',
        Ftype3::Chr => 'c',
        Ftype3::Lnk => 'l',
        Ftype3::Sock => 's',
        Ftype3::Fifo => 'p',
    };
    let mut s = String::with_capacity(10);
    s.push(kind);
    // (read bit, write bit, execute bit, special bit, special letter)
    let triads = [
        (0o400, 0o200, 0o100, 0o4000, 's'),
        (0o040, 0o020, 0o010, 0o2000, 's'),
        (0o004, 0o002, 0o001, 0o1000, 't'),
    ];
    for (r, w, x, special, letter) in triads {
        s.push(if mode & r != 0 { 'r' } else { '-' });
        s.push(if mode & w != 0 { 'w' } else { '-' });
        s.push(match (mode & x != 0, mode & special != 0) {
            (true, true) => letter,
            (false, true) => letter.to_ascii_uppercase(),
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// The words stat(1) uses for a file type.
pub(crate) fn type_name(ftype: Ftype3) -> &'static str {
    match ftype {
        Ftype3::Reg => "regular file",
        Ftype3::Dir => "directory",
        Ftype3::Blk => "block special file",
        Ftype3::Chr => "character special file",
        Ftype3::Lnk => "symbolic link",
        Ftype3::Sock => "socket",
        Ftype3::Fifo => "fifo",
    }
}

/// Broken-down local time of `seconds` since the epoch, and the zone's
/// offset from UTC in seconds.
fn local_time(seconds: i64) -> (libc::tm, i64) {
    // SAFETY: localtime_r writes only into the `tm` we pass and reads the
    // time_t we pass; an all-zero `tm` is a valid value to start from.
    unsafe {
        let t: libc::time_t = seconds as libc::time_t;
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            // Out of the C library's range: show it as UTC.
            tm = std::mem::zeroed();
            libc::gmtime_r(&t, &mut tm);
            return (tm, 0);
        }
        let offset = tm.tm_gmtoff;
        (tm, offset)
    }
}

const MONTHS: [&str; 12] =
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// ls(1) rule: a time within six months of now shows the clock, anything
/// older or in the future shows the year instead.
const RECENT_SECS: i64 = 365 * 24 * 3600 / 2;

/// `Nov 21 14:22` for recent times, `Nov 21  2025` otherwise (as `ls -l`).
pub(crate) fn ls_time(t: Nfstime3, now_secs: i64) -> String {
    let secs = t.seconds as i64;
    let (tm, _) = local_time(secs);
    let month = MONTHS[tm.tm_mon.clamp(0, 11) as usize];
    if secs <= now_secs && now_secs - secs < RECENT_SECS {
        format!("{month} {:>2} {:02}:{:02}", tm.tm_mday, tm.tm_hour, tm.tm_min)
    } else {
        format!("{month} {:>2}  {}", tm.tm_mday, tm.tm_year + 1900)
    }
}

/// `2026-11-21 14:22:51.123456789 +0000`, as stat(1) prints times.
pub(crate) fn full_time(t: Nfstime3) -> String {
    let (tm, offset) = local_time(t.seconds as i64);
    let sign = if offset < 0 { '-' } else { '+' };
    let off = offset.abs();
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:09} {sign}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        t.nseconds,
        off / 3600,
        off % 3600 / 60
    )
}

/// Seconds since the epoch now (0 if the clock is before 1970).
pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_strings_match_ls() {
        assert_eq!(mode_string(Ftype3::Reg, 0o644), "-rw-r--r--");
        assert_eq!(mode_string(Ftype3::Dir, 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(Ftype3::Reg, 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string(Ftype3::Reg, 0o2640), "-rw-r-S---");
        assert_eq!(mode_string(Ftype3::Lnk, 0o777), "lrwxrwxrwx");
        assert_eq!(mode_string(Ftype3::Dir, 0o1776), "drwxrwxrwT");
    }

    #[test]
    fn old_times_show_the_year() {
        let now = 2_000_000_000;
        let old = Nfstime3 { seconds: 1_000_000_000, nseconds: 0 };
        let s = ls_time(old, now);
        assert!(s.ends_with("2001"), "{s}");
        let recent = Nfstime3 { seconds: (now - 3600) as u32, nseconds: 0 };
        assert!(ls_time(recent, now).contains(':'));
    }
}
