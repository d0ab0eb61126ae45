//! The lock file: one process owns a state directory's inbox at a time.

use std::fs::{File, OpenOptions};
use std::path::Path;

use super::InboxError;

/// File name of the lock that makes one process the owner of a state directory's inbox.
pub const LOCK_FILE: &str = "inbox.lock";

/// Takes the advisory lock on `dir`'s [`LOCK_FILE`]; [`InboxError::Busy`] while another
/// process holds it. The lock lasts as long as the returned handle.
pub(super) fn take_lock(dir: &Path) -> Result<File, InboxError> {
    let path = dir.join(LOCK_FILE);
    let file = crate::store::owner_only::open(
        &path,
        OpenOptions::new().create(true).truncate(false).write(true),
    )
    .map_err(|source| InboxError::Lock {
        path: path.clone(),
        source,
    })?;
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => Ok(file),
        Err(fs4::TryLockError::WouldBlock) => Err(InboxError::Busy {
            dir: dir.to_path_buf(),
        }),
        Err(fs4::TryLockError::Error(source)) => Err(InboxError::Lock { path, source }),
    }
}
