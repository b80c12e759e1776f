//! Disk space: how full the filesystem under a path is (`statvfs`), for the store's
//! retention and its refusal of puts on a full disk.

use crate::IoError;
use std::path::Path;

/// Fraction (0.0–1.0) of the filesystem holding `path` that is in use, counted as Java's
/// `UtilAll.getDiskPartitionSpaceUsedPercent` does: `(total - free) / total`.
///
/// # Errors
/// [`IoError::File`] if `statvfs` fails.
pub fn used_ratio(path: &Path) -> Result<f64, IoError> {
    let stat =
        rustix::fs::statvfs(path).map_err(|errno| IoError::file("statvfs", path, errno.into()))?;
    let total = stat.f_blocks.saturating_mul(stat.f_frsize);
    let free = stat.f_bfree.saturating_mul(stat.f_frsize);
    if total == 0 {
        return Ok(0.0);
    }
    #[allow(clippy::cast_precision_loss)] // a ratio needs no more than f64's precision
    Ok(total.saturating_sub(free) as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn used_ratio_of_the_current_directory_is_a_fraction() {
        let ratio = super::used_ratio(std::path::Path::new(".")).unwrap();
        assert!((0.0..=1.0).contains(&ratio), "{ratio}");
        assert!(super::used_ratio(std::path::Path::new("/no/such/dir")).is_err());
    }
}
