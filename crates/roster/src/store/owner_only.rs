//! Every file roster keeps state in is owner-only (0600): the audit trail, the inbox's lock, the
//! SQLite stores (pins, OAuth tokens) and the files SQLite keeps beside them.
//!
//! A file is created 0600 whatever the umask and whatever the mode of the directory it is in
//! (`state_dir` may name a directory roster did not make, and roster leaves a directory's mode
//! alone), and a file found wider — made by an older roster, or copied in — is narrowed when
//! roster opens it. The audit trail holds what servers pushed and clients called, the stores
//! hold tokens and approvals: none of it is for other users of the machine.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// The files SQLite keeps beside a database, by suffix. SQLite makes them with the database's
/// own mode; one left by an older roster is narrowed with the database.
const SQLITE_SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Creates the state directory `dir` (and missing parents) owner-only, or leaves an existing
/// one exactly as it is: roster never changes the mode of a directory it did not create
/// (`state_dir = "."` must not lock anyone out of their working directory).
pub fn ensure_state_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Opens `path` with `options`, creating it 0600 if it does not exist and narrowing it to its
/// owner if it does.
pub(crate) fn open(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file = options.mode_owner_only().open(path)?;
    narrow(&file)?;
    Ok(file)
}

/// Makes sure the SQLite database at `path` exists owner-only before SQLite opens it (SQLite
/// would create it with the umask's mode), and narrows the files SQLite keeps beside it.
///
/// An existing database is never opened here, only looked at and narrowed by its path: SQLite's
/// locks are POSIX record locks, which a process loses on a file as soon as it closes *any*
/// descriptor of it, so opening and closing a database this process already has open (a
/// second store on the same file, `roster tools approve` from the dashboard) would take the
/// locks from under the connection that holds them. A new file is made with `O_EXCL`: no one
/// has it open, so no one holds a lock on it.
pub(crate) fn sqlite_file(path: &Path) -> io::Result<()> {
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode_owner_only()
        .open(path)
    {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => existing(path)?,
        Err(e) => return Err(e),
    }
    for suffix in SQLITE_SIDE_FILES {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        existing(Path::new(&side))?;
    }
    Ok(())
}

/// Narrows the file at `path` to its owner if it exists, by its path (no descriptor is
/// opened); nothing when it does not exist.
pub(crate) fn existing(path: &Path) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(metadata) => narrow_mode(path, &metadata),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// `OpenOptions` that create a file 0600.
trait OwnerOnly {
    fn mode_owner_only(&mut self) -> &mut Self;
}

impl OwnerOnly for OpenOptions {
    fn mode_owner_only(&mut self) -> &mut Self {
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            self.mode(0o600);
        }
        self
    }
}

/// Takes away every permission of the group and of others from the file at `path`.
fn narrow_mode(path: &Path, metadata: &std::fs::Metadata) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700))?;
        }
    }
    #[cfg(not(unix))]
    let _ = (path, metadata);
    Ok(())
}

/// Takes away every permission of the group and of others from the open `file`.
fn narrow(file: &File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata()?.permissions().mode();
        if mode & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(mode & 0o700))?;
        }
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_new_file_is_owner_only_and_a_wider_one_is_narrowed() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod dir");
        let new = dir.path().join("new");
        open(&new, OpenOptions::new().create(true).append(true)).expect("open");
        assert_eq!(mode(&new), 0o600);

        let old = dir.path().join("old");
        std::fs::write(&old, "kept").expect("write");
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        sqlite_file(&old).expect("narrowed");
        assert_eq!(mode(&old), 0o600);
        assert_eq!(std::fs::read_to_string(&old).expect("read"), "kept");

        let wal = dir.path().join("old-wal");
        std::fs::write(&wal, "").expect("write");
        std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o664)).expect("chmod");
        sqlite_file(&old).expect("narrowed");
        assert_eq!(mode(&wal), 0o600);
        assert_eq!(mode(dir.path()), 0o755, "the directory is left alone");
    }
}
