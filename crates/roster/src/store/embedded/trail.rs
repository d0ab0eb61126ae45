//! The inbox's trail in the state dir: `audit.jsonl` (active, append-only) and
//! `audit.jsonl.1` (the one rotated backup), owned by one process at a time through the
//! advisory lock on `inbox.lock`. Writing happens under the inbox's mutex; reading is replay.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::store::StoreError;
use crate::store::owner_only;
use crate::store::trail::{
    AuditRecord, Flushed, FsyncPolicy, InboxTrail, OpenTrail, Seq, TrailOptions,
};

/// File name of the active audit trail inside the state directory.
pub const AUDIT_FILE: &str = "audit.jsonl";
/// File name of the single rotated backup.
pub const AUDIT_BACKUP_FILE: &str = "audit.jsonl.1";

fn audit_path(dir: &Path) -> PathBuf {
    dir.join(AUDIT_FILE)
}

fn backup_path(dir: &Path) -> PathBuf {
    dir.join(AUDIT_BACKUP_FILE)
}

/// The write side: the open append handle and what the fsync policy needs to know.
struct AuditFile {
    /// The advisory lock on `inbox.lock`, held as long as the file is written.
    _lock: File,
    path: PathBuf,
    backup: PathBuf,
    /// Shared so the background flusher can fsync without holding the inbox's lock.
    file: Arc<File>,
    size: u64,
    rotate_bytes: u64,
    /// After a failed rotation, do not retry on every append: wait for this much more data.
    next_rotation_at: u64,
    fsync: FsyncPolicy,
    last_sync: Instant,
    dirty: bool,
    /// The last disk error, kept so repeated failures log once and recovery logs once.
    failing: Option<String>,
}

/// Opens (creating it owner-only) an audit file for appending.
fn open_append(path: &Path) -> Result<File, StoreError> {
    owner_only::open(path, OpenOptions::new().create(true).append(true)).map_err(|source| {
        StoreError::OpenTrail {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Opens the trail of the state dir `dir` for the one process that writes it: makes the dir,
/// takes the lock ([`StoreError::Busy`] while another process holds it), reads the backup
/// then the active file back (an unreadable backup is skipped: it is history) and opens the
/// active file for appending, cutting a torn last line off.
pub(crate) fn open(dir: &Path, options: &TrailOptions) -> Result<OpenTrail, StoreError> {
    owner_only::ensure_state_dir(dir).map_err(|source| StoreError::StateDir {
        path: dir.to_owned(),
        source,
    })?;
    let lock = take_lock(dir)?;
    let (records, valid_len) = read_all(dir)?;
    let file = AuditFile::open(dir, lock, valid_len, options.rotate_bytes, options.fsync)?;
    Ok(OpenTrail {
        trail: Box::new(file),
        records,
    })
}

/// The records of the trail in `dir`, the backup's then the active file's, read without the
/// lock (a running gateway holds it) and without writing; nothing where nothing was kept.
pub(crate) fn history(dir: &Path) -> Result<Vec<AuditRecord>, StoreError> {
    read_all(dir).map(|(records, _)| records)
}

/// The backup's records then the active file's, and where the active file's last whole line
/// ends. An unreadable backup is history: skipped, with a warning.
fn read_all(dir: &Path) -> Result<(Vec<AuditRecord>, u64), StoreError> {
    let backup = backup_path(dir);
    let mut records = match read_file(&backup) {
        Ok(read) => read.records,
        Err(error) => {
            tracing::warn!(path = %backup.display(), %error, "skipping the unreadable audit backup");
            Vec::new()
        }
    };
    let active = audit_path(dir);
    let read = read_file(&active).map_err(|source| StoreError::ReadTrail {
        path: active,
        source,
    })?;
    records.extend(read.records);
    Ok((records, read.valid_len))
}

impl AuditFile {
    /// Opens the active file for appending; `valid_len` is where the last whole line ends, and
    /// anything after it (a torn write from a crash) is cut off so new lines start clean.
    fn open(
        dir: &Path,
        lock: File,
        valid_len: u64,
        rotate_bytes: u64,
        fsync: FsyncPolicy,
    ) -> Result<Self, StoreError> {
        let path = audit_path(dir);
        let file = open_append(&path)?;
        let backup = backup_path(dir);
        // A backup an older roster rotated keeps its mode; it holds the same records.
        if let Err(error) = owner_only::existing(&backup) {
            tracing::warn!(path = %backup.display(), %error, "cannot make the audit backup owner-only");
        }
        let len = file
            .metadata()
            .map_err(|source| StoreError::OpenTrail {
                path: path.clone(),
                source,
            })?
            .len();
        let mut size = len;
        if len > valid_len {
            match file.set_len(valid_len) {
                Ok(()) => {
                    tracing::warn!(
                        path = %path.display(),
                        bytes = len - valid_len,
                        "cut a torn last line off the audit trail"
                    );
                    size = valid_len;
                }
                Err(error) => tracing::warn!(
                    path = %path.display(),
                    %error,
                    "could not cut a torn last line off the audit trail; replay will keep skipping it"
                ),
            }
        }
        Ok(AuditFile {
            _lock: lock,
            backup,
            path,
            file: Arc::new(file),
            size,
            rotate_bytes,
            next_rotation_at: rotate_bytes,
            fsync,
            last_sync: Instant::now(),
            dirty: false,
            failing: None,
        })
    }

    /// True when `line_len` more bytes would pass the rotation limit of a non-empty file.
    fn wants_rotation(&self, line_len: usize) -> bool {
        self.size > 0 && self.size + line_len as u64 > self.next_rotation_at.max(self.rotate_bytes)
    }

    /// Moves the active file to the backup and starts a fresh one, whose first lines are
    /// `head` (a checkpoint and what is still pending, so the fresh file alone still knows the
    /// seq, the ack state and the open confirms).
    fn rotate(&mut self, head: &[AuditRecord]) {
        if let Err(error) = self.file.sync_all() {
            tracing::warn!(path = %self.path.display(), %error, "fsync before rotation failed");
        }
        if let Err(error) = fs::rename(&self.path, &self.backup) {
            tracing::warn!(
                from = %self.path.display(),
                to = %self.backup.display(),
                %error,
                "could not rotate the audit trail; it keeps growing until rotation succeeds"
            );
            self.next_rotation_at = self.size + self.rotate_bytes;
            return;
        }
        match open_append(&self.path) {
            Ok(file) => {
                self.file = Arc::new(file);
                self.size = 0;
                self.next_rotation_at = self.rotate_bytes;
                self.dirty = false;
                for record in head {
                    self.append(record);
                }
            }
            Err(error) => {
                // The handle we hold now points at the backup; writing on there keeps the
                // trail whole, and moving it back makes the next rotation try again.
                tracing::warn!(%error, "could not start a fresh audit file after rotation");
                if fs::rename(&self.backup, &self.path).is_err() {
                    tracing::warn!(path = %self.backup.display(), "audit appends continue in the backup file");
                }
                self.next_rotation_at = self.size + self.rotate_bytes;
            }
        }
    }

    /// Appends one record as one line, never rotating (checkpoints go here). Disk errors are logged, never returned: the ring is the
    /// live truth and a full disk must not stop notifications from being kept in memory.
    fn append(&mut self, record: &AuditRecord) {
        let line = match record.to_line() {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(%error, "could not encode an audit record");
                return;
            }
        };
        self.write_line(&line);
    }

    /// Appends `record`, rotating first (with `head()` as the fresh file's first lines) when the
    /// line would pass the size limit.
    fn append_rotating(&mut self, record: &AuditRecord, head: impl FnOnce() -> Vec<AuditRecord>) {
        let line = match record.to_line() {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(%error, "could not encode an audit record");
                return;
            }
        };
        if self.wants_rotation(line.len()) {
            self.rotate(&head());
        }
        self.write_line(&line);
    }

    fn write_line(&mut self, line: &[u8]) {
        match (&*self.file).write_all(line) {
            Ok(()) => {
                self.size += line.len() as u64;
                self.dirty = true;
                if let Some(previous) = self.failing.take() {
                    tracing::info!(path = %self.path.display(), %previous, "audit trail writes work again");
                }
            }
            Err(error) => {
                // A partial write (disk full) would leave half a line that glues itself to the
                // next record; cutting back to the last whole line keeps every line parseable.
                if let Err(cut) = self.file.set_len(self.size) {
                    tracing::warn!(%cut, "could not cut a partial audit line back off");
                }
                self.fail("append to", error);
                return;
            }
        }
        match self.fsync {
            FsyncPolicy::Always => self.sync(),
            FsyncPolicy::Interval(every) if self.last_sync.elapsed() >= every => self.sync(),
            FsyncPolicy::Interval(_) | FsyncPolicy::Never => {}
        }
    }

    fn fail(&mut self, what: &str, error: io::Error) {
        let message = error.to_string();
        if self.failing.as_deref() != Some(message.as_str()) {
            tracing::warn!(path = %self.path.display(), %error, "could not {what} the audit trail");
        }
        self.failing = Some(message);
    }

    /// fsyncs now (data only: the size change of an append is part of the data).
    fn sync(&mut self) {
        if let Err(error) = self.file.sync_data() {
            self.fail("fsync", error);
        }
        self.last_sync = Instant::now();
        self.dirty = false;
    }

    /// For the background flusher: when the interval policy says a sync is due, hands out the
    /// file to sync outside the lock and marks the data as synced.
    fn take_due_sync(&mut self) -> Option<Arc<File>> {
        let FsyncPolicy::Interval(every) = self.fsync else {
            return None;
        };
        if !self.dirty || self.last_sync.elapsed() < every {
            return None;
        }
        self.dirty = false;
        self.last_sync = Instant::now();
        Some(Arc::clone(&self.file))
    }

    /// The interval of the interval policy, if that is the policy.
    fn interval(&self) -> Option<Duration> {
        match self.fsync {
            FsyncPolicy::Interval(every) => Some(every),
            FsyncPolicy::Always | FsyncPolicy::Never => None,
        }
    }

    /// Empties the active file through the open handle and removes the backup; returns what
    /// could not be done, in words. The handle is opened with `O_APPEND`, so the next write
    /// lands at offset 0 with no reopen and no window for another writer.
    fn purge(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        match self.file.set_len(0) {
            Ok(()) => {
                self.size = 0;
                self.next_rotation_at = self.rotate_bytes;
            }
            Err(error) => problems.push(format!(
                "could not truncate {}: {error}",
                self.path.display()
            )),
        }
        match fs::remove_file(&self.backup) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => problems.push(format!(
                "could not remove {}: {error}",
                self.backup.display()
            )),
        }
        problems
    }

    /// The last disk error, if writes are failing now.
    fn failing(&self) -> Option<&str> {
        self.failing.as_deref()
    }
}

/// What one file of the audit trail holds, read line by line.
struct FileRead {
    records: Vec<AuditRecord>,
    /// Byte offset just past the last whole line.
    valid_len: u64,
}

/// Reads every whole, parseable line of `path`. A missing file is empty. Unparseable lines are
/// skipped with a warning; a last line without its newline is a torn write and is skipped too.
fn read_file(path: &Path) -> Result<FileRead, io::Error> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Ok(FileRead {
                records: Vec::new(),
                valid_len: 0,
            });
        }
        Err(error) => return Err(error),
    };
    let mut reader = BufReader::new(file);
    let mut records = Vec::new();
    let mut line = Vec::new();
    let mut offset: u64 = 0;
    let mut line_no: u64 = 0;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        line_no += 1;
        if line.last() != Some(&b'\n') {
            tracing::warn!(
                path = %path.display(),
                line = line_no,
                bytes = read,
                "skipping a torn last line in the audit trail"
            );
            break;
        }
        offset += read as u64;
        match serde_json::from_slice::<AuditRecord>(&line) {
            Ok(record) => records.push(record),
            Err(error) => tracing::warn!(
                path = %path.display(),
                line = line_no,
                %error,
                "skipping an unreadable line in the audit trail"
            ),
        }
    }
    Ok(FileRead {
        records,
        valid_len: offset,
    })
}

/// File name of the lock that makes one process the owner of a state directory's inbox.
pub const LOCK_FILE: &str = "inbox.lock";

/// Takes the advisory lock on `dir`'s [`LOCK_FILE`]; [`StoreError::Busy`] while another
/// process holds it. The lock lasts as long as the returned handle.
fn take_lock(dir: &Path) -> Result<File, StoreError> {
    let path = dir.join(LOCK_FILE);
    let file = owner_only::open(
        &path,
        OpenOptions::new().create(true).truncate(false).write(true),
    )
    .map_err(|source| StoreError::Lock {
        path: path.clone(),
        source,
    })?;
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => Ok(file),
        Err(fs4::TryLockError::WouldBlock) => Err(StoreError::Busy {
            dir: dir.to_path_buf(),
        }),
        Err(fs4::TryLockError::Error(source)) => Err(StoreError::Lock { path, source }),
    }
}

impl InboxTrail for AuditFile {
    fn interval(&self) -> Option<Duration> {
        AuditFile::interval(self)
    }

    fn sync(&mut self) {
        AuditFile::sync(self);
    }

    fn take_due_sync(&mut self) -> Option<Arc<File>> {
        AuditFile::take_due_sync(self)
    }

    fn failing(&self) -> Option<&str> {
        AuditFile::failing(self)
    }

    fn append(
        &mut self,
        record: AuditRecord,
        next_seq: Seq,
        head: &dyn Fn() -> Vec<AuditRecord>,
    ) -> Flushed {
        Flushed::local(record, next_seq, |record| {
            self.append_rotating(record, head)
        })
    }

    fn purge(&mut self, checkpoint: &AuditRecord) -> Vec<String> {
        let mut problems = AuditFile::purge(self);
        AuditFile::append(self, checkpoint);
        AuditFile::sync(self);
        if let Some(failing) = AuditFile::failing(self) {
            problems.push(format!("could not record the purge: {failing}"));
        }
        problems
    }
}
