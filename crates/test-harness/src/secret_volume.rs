//! A directory laid out like a Secret volume the kubelet mounts, and updated the way the
//! kubelet updates it (its `AtomicWriter`): the keys are symlinks `<key> -> ..data/<key>`,
//! `..data` is a symlink to a timestamped directory `..2026_11_27_10_04_05.<n>` holding the
//! files, and an update writes a new timestamped directory, points a new symlink
//! `..data_tmp` at it, renames that over `..data` (one atomic step: a reader sees all old or
//! all new files) and removes the old directory. A program that opened the old file, or
//! resolved the symlinks once, keeps seeing the old content or a deleted file.

use std::io;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A Secret volume in a temporary directory (removed on drop).
#[derive(Debug)]
pub struct SecretVolume {
    dir: tempfile::TempDir,
    current: Option<String>,
    generation: u32,
}

impl SecretVolume {
    /// A volume holding `files` (key, content).
    pub fn new(files: &[(&str, &str)]) -> io::Result<SecretVolume> {
        let mut volume = SecretVolume { dir: tempfile::tempdir()?, current: None, generation: 0 };
        volume.update(files)?;
        Ok(volume)
    }

    /// The volume's directory (the mount point).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The path a program is given for `key`, e.g. `/etc/hcloud/token` (a symlink).
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.path().join(key)
    }

    /// The timestamped directory `..data` points to now.
    pub fn data_dir(&self) -> Option<PathBuf> {
        self.current.as_ref().map(|name| self.dir.path().join(name))
    }

    /// Replaces the volume's content with `files` as the kubelet does (see the module docs).
    pub fn update(&mut self, files: &[(&str, &str)]) -> io::Result<()> {
        self.generation += 1;
        let name = format!("..{}.{}", utc_stamp(SystemTime::now()), self.generation);
        let data = self.dir.path().join(&name);
        std::fs::create_dir(&data)?;
        for (key, content) in files {
            std::fs::write(data.join(key), content)?;
        }
        let tmp = self.dir.path().join("..data_tmp");
        symlink(&name, &tmp)?;
        std::fs::rename(&tmp, self.dir.path().join("..data"))?;
        for (key, _) in files {
            let link = self.path(key);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(Path::new("..data").join(key), &link)?;
            }
        }
        if let Some(old) = self.current.replace(name) {
            std::fs::remove_dir_all(self.dir.path().join(old))?;
        }
        Ok(())
    }
}

/// `2026_11_27_10_04_05`: the kubelet's directory stamp (UTC); also names the suites' kept logs.
pub fn utc_stamp(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (H. Hinnant's `civil_from_days`).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}_{month:02}_{day:02}_{:02}_{:02}_{:02}", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_stamp_is_the_utc_date_and_time() {
        assert_eq!(utc_stamp(UNIX_EPOCH), "1970_01_01_00_00_00");
        // 2026-11-27T10:04:05Z
        assert_eq!(utc_stamp(UNIX_EPOCH + Duration::from_secs(1_795_773_845)), "2026_11_27_10_04_05");
        assert_eq!(utc_stamp(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000_02_29_00_00_00");
    }

    #[test]
    fn an_update_swaps_the_data_symlink_and_removes_the_old_directory() {
        let mut v = SecretVolume::new(&[("token", "old"), ("user", "u")]).expect("volume");
        let first = v.data_dir().expect("data");
        assert_eq!(std::fs::read_to_string(v.path("token")).expect("read"), "old");
        assert_eq!(std::fs::read_link(v.path("token")).expect("link"), Path::new("..data/token"));
        let resolved = std::fs::canonicalize(v.path("token")).expect("resolves");
        v.update(&[("token", "new"), ("user", "u")]).expect("update");
        assert_eq!(std::fs::read_to_string(v.path("token")).expect("read"), "new");
        assert!(!first.exists(), "the old directory is gone");
        assert!(std::fs::read_to_string(resolved).is_err(), "a path resolved once is dead");
        let name = v.data_dir().expect("data");
        let name = name.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(name.starts_with("..20") && name.ends_with(".2"), "{name}");
        assert!(!v.dir().join("..data_tmp").exists());
    }
}
