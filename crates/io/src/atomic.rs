//! Atomic output: write to a temporary name beside the target, sync, then rename, so an
//! interrupted run never leaves a partial file or directory under the final name.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use crate::error::IoError;
use crate::pieces::InPieces;
use crate::stale::remove_stale_temporaries;
use crate::temp_name::temp_path_for;

/// What [`write_atomically`] hands its writer: the temporary file, buffered, large slices
/// passed on in pieces.
pub type AtomicOut = BufWriter<InPieces<File>>;

/// Size of the write buffer [`write_atomically`] puts in front of its temporary file.
pub const BUFFER_SIZE: usize = 1 << 20;

/// One temporary being written right now (keyed by its path in [`IN_PROGRESS`]).
struct InProgress {
    /// The final name it is meant to become.
    target: PathBuf,
    /// Set once [`remove_temporaries`] removed it: from then on it may not be created (again)
    /// nor become its target, so a writer that goes on after an interrupt leaves nothing.
    removed: bool,
}

/// Temporary paths being written right now, so an interrupted process can remove them
/// ([`remove_temporaries`], called from the CLI's signal handler and the Python package's
/// Ctrl-C path). Creating a registered temporary ([`TempPath::create_file`],
/// [`TempPath::create_dir`]) and renaming it into place ([`TempPath::persist`]) happen under
/// this lock, so each either happens before the removal (and is undone by it) or sees that
/// the removal happened and refuses.
///
/// A map by temporary path, so that a writer of thousands of files (a reshard to a mesh of
/// 16,384 devices) registers, checks and unregisters each in constant time.
static IN_PROGRESS: LazyLock<Mutex<InProgressMap>> = LazyLock::new(Default::default);

/// The temporaries in progress, by path.
type InProgressMap = HashMap<PathBuf, InProgress>;

fn in_progress() -> std::sync::MutexGuard<'static, InProgressMap> {
    IN_PROGRESS.lock().unwrap_or_else(|e| e.into_inner())
}

fn register(tmp: &Path, target: &Path) {
    in_progress().insert(
        tmp.to_path_buf(),
        InProgress {
            target: target.to_path_buf(),
            removed: false,
        },
    );
}

fn unregister(path: &Path) {
    in_progress().remove(path);
}

/// Whether `tmp` was removed by [`remove_temporaries`]; the caller holds the lock.
fn was_removed(list: &InProgressMap, tmp: &Path) -> bool {
    list.get(tmp).is_some_and(|p| p.removed)
}

fn remove_path(path: &Path) {
    if path.is_dir() {
        let _ = fs::remove_dir_all(path);
    } else {
        let _ = fs::remove_file(path);
    }
}

/// Removes every temporary output still being written: for a signal handler, before exiting,
/// or for an embedding abandoning a worker. Each is first renamed to a fresh temporary name of
/// the same target, so a writer still at work can no longer create files inside it through
/// its old path (a plain `remove_dir_all` would race with it and leave a directory behind),
/// then removed; should the process die in between, the next writer of the target removes
/// the renamed one as stale ([`remove_stale_temporaries`]).
pub fn remove_temporaries() {
    // Called from a handler thread (the CLI's `ctrlc` handler) or the Python package's waiting
    // thread, not from inside a signal, so waiting for a writer that holds the lock for a
    // moment is safe.
    let mut list = in_progress();
    for (tmp, entry) in list.iter_mut().filter(|(_, p)| !p.removed) {
        entry.removed = true;
        let aside = temp_path_for(&entry.target);
        if aside != *tmp && fs::rename(tmp, &aside).is_ok() {
            remove_path(&aside);
        } else {
            remove_path(tmp);
        }
    }
}

/// The error for a temporary [`remove_temporaries`] removed, or whose thread was cancelled.
fn abandoned() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        "cancelled; output not written",
    )
}

thread_local! {
    /// The cancel token of the work running on this thread, if its caller gave one.
    static CANCEL_TOKEN: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Gives the work that runs next on this thread a cancel token: once the token is set, every
/// [`TempPath`] (and so every [`write_atomically`]) created on this thread refuses to become
/// its target, and is removed instead. An embedding that runs a long operation on a worker
/// thread (the Python package, on Ctrl-C) sets the token to abandon it without leaving output.
pub fn set_cancel_token(token: Option<Arc<AtomicBool>>) {
    CANCEL_TOKEN.with(|t| *t.borrow_mut() = token);
}

/// The calling thread's cancel token ([`set_cancel_token`]), to hand to a thread it spawns
/// to write for it.
pub fn cancel_token() -> Option<Arc<AtomicBool>> {
    current_cancel_token()
}

fn current_cancel_token() -> Option<Arc<AtomicBool>> {
    CANCEL_TOKEN.with(|t| t.borrow().clone())
}

fn is_cancelled(token: &Option<Arc<AtomicBool>>) -> bool {
    token.as_ref().is_some_and(|t| t.load(Ordering::SeqCst))
}

fn cancelled_error(target: &Path) -> IoError {
    IoError::os(target, abandoned())
}

/// A temporary file or directory that becomes `target` only when [`TempPath::persist`] is
/// called. Until then it is registered for [`remove_temporaries`]; dropped without persisting
/// (an error, a panic), it is removed. Use it when the output is a directory or is written by
/// several writers; [`write_atomically`] covers the common one-file case.
#[derive(Debug)]
pub struct TempPath {
    tmp: PathBuf,
    target: PathBuf,
    persisted: bool,
    stale: Vec<PathBuf>,
    cancel: Option<Arc<AtomicBool>>,
}

impl TempPath {
    /// Reserves a temporary name beside `target` (nothing is created yet), after removing the
    /// temporaries dead writers of `target` left there ([`remove_stale_temporaries`]; see
    /// [`TempPath::removed_stale`]).
    pub fn new(target: &Path) -> Self {
        let stale = remove_stale_temporaries(target);
        Self::reserve(target, stale)
    }

    /// Like [`TempPath::new`] without the look for stale temporaries: for a writer of many
    /// files in one directory that removed the stale temporaries of all of them at once
    /// ([`crate::remove_stale_temporaries_of`]), so that writing N files lists the directory
    /// once instead of N times.
    pub fn new_cleaned(target: &Path) -> Self {
        Self::reserve(target, Vec::new())
    }

    fn reserve(target: &Path, stale: Vec<PathBuf>) -> Self {
        let tmp = temp_path_for(target);
        register(&tmp, target);
        Self {
            tmp,
            target: target.to_path_buf(),
            persisted: false,
            stale,
            cancel: current_cancel_token(),
        }
    }

    /// The temporaries of dead writers of the same target removed when this one was made.
    pub fn removed_stale(&self) -> &[PathBuf] {
        &self.stale
    }

    /// Where to write.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// The final name.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Creates the temporary as an empty file, open for writing. Refused (an `Interrupted`
    /// error) once the temporary was removed by [`remove_temporaries`] or the thread's cancel
    /// token was set, so that a writer going on after an interrupt creates nothing.
    pub fn create_file(&self) -> std::io::Result<File> {
        let list = in_progress();
        self.refuse_if_abandoned(&list)?;
        File::create(&self.tmp)
    }

    /// Creates the temporary as an empty directory; refused like [`TempPath::create_file`].
    /// Create what goes inside with plain `create_dir` / `File::create`, never
    /// `create_dir_all`: once [`remove_temporaries`] took the directory away, those fail
    /// instead of bringing it back.
    pub fn create_dir(&self) -> std::io::Result<()> {
        let list = in_progress();
        self.refuse_if_abandoned(&list)?;
        fs::create_dir(&self.tmp)
    }

    fn refuse_if_abandoned(&self, list: &InProgressMap) -> std::io::Result<()> {
        if is_cancelled(&self.cancel) || was_removed(list, &self.tmp) {
            return Err(abandoned());
        }
        Ok(())
    }

    /// Renames the temporary over the target and syncs the parent directory. The caller syncs
    /// the temporary's contents first (files: `File::sync_all`).
    /// Refuses (and removes the temporary) when the thread's cancel token was set
    /// ([`set_cancel_token`]) or [`remove_temporaries`] removed it.
    pub fn persist(self) -> Result<(), IoError> {
        let target = self.target.clone();
        self.persist_unsynced()?;
        sync_parent(&target);
        Ok(())
    }

    /// [`TempPath::persist`] without syncing the directory: for a writer renaming many files
    /// into one directory, which calls [`sync_parent`] once after the last.
    pub fn persist_unsynced(mut self) -> Result<(), IoError> {
        let list = in_progress();
        self.refuse_if_abandoned(&list)
            .map_err(|e| IoError::os(&self.target, e))?;
        fs::rename(&self.tmp, &self.target).map_err(|e| IoError::os(&self.target, e))?;
        drop(list);
        self.persisted = true;
        Ok(())
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if !self.persisted {
            remove_path(&self.tmp);
        }
        unregister(&self.tmp);
    }
}

/// Writes `path` atomically: `write` fills a buffered temporary file, which is then flushed,
/// synced and renamed over `path`. On any error the temporary file is removed and `path` is
/// left as it was. Generic over the caller's error type, which must wrap [`IoError`]. Errors
/// name `path`, the file the user asked for, not the temporary. A slice larger than the
/// buffer reaches the file a piece at a time ([`InPieces`]).
pub fn write_atomically<T, E: From<IoError>>(
    path: &Path,
    write: impl FnOnce(&mut AtomicOut) -> Result<T, E>,
) -> Result<T, E> {
    let tmp = TempPath::new(path);
    let file = tmp.create_file().map_err(|e| IoError::os(path, e))?;
    let mut out = BufWriter::with_capacity(BUFFER_SIZE, InPieces(file));
    let value = write(&mut out)?;
    if is_cancelled(&tmp.cancel) {
        return Err(cancelled_error(path).into());
    }
    let file = out
        .into_inner()
        .map_err(|e| IoError::os(path, e.into_error()))?
        .into_inner();
    file.sync_all().map_err(|e| IoError::os(path, e))?;
    drop(file);
    tmp.persist()?;
    Ok(value)
}

/// Bytes handed to one copy call in [`copy_atomically`]: progress is reported and a
/// cancellation noticed between pieces.
const COPY_PIECE: u64 = 64 << 20;

/// Copies the regular file `from` to `to` atomically, as [`write_atomically`] writes, and
/// returns its length. The copy is left to the kernel (`std::io::copy` between files uses
/// `copy_file_range` on Linux): a 566 MB model copied that way took 0.18 s where writing the
/// same bytes from a memory map took 0.7 to 1.0 s on the benchmark machine (issue 15).
/// `progress` is called with the bytes of each piece copied. A file that changes length
/// while it is copied is an error (the copy would not be the file that was read).
pub fn copy_atomically(
    from: &Path,
    to: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, IoError> {
    let (mut source, expected) = crate::open_regular(from)?;
    let tmp = TempPath::new(to);
    let mut out = tmp.create_file().map_err(|e| IoError::os(to, e))?;
    let mut copied = 0;
    loop {
        if is_cancelled(&tmp.cancel) {
            return Err(cancelled_error(to));
        }
        let piece = std::io::copy(&mut (&mut source).take(COPY_PIECE), &mut out)
            .map_err(|e| IoError::os(to, e))?;
        if piece == 0 {
            break;
        }
        copied += piece;
        progress(piece);
    }
    if copied != expected {
        return Err(IoError::os(
            from,
            std::io::Error::other(format!(
                "the file changed while it was copied ({expected} bytes, then {copied})"
            )),
        ));
    }
    out.sync_all().map_err(|e| IoError::os(to, e))?;
    drop(out);
    tmp.persist()?;
    Ok(copied)
}

/// Syncs the directory holding `path` so a rename is durable. Best effort: some filesystems
/// refuse to sync directories, which does not make the write less atomic.
pub fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_copy_has_the_bytes_of_its_source_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("model.pb");
        // More than one copy piece, not a multiple of it.
        let bytes: Vec<u8> = (0..super::COPY_PIECE + 12345)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        std::fs::write(&from, &bytes).unwrap();
        let to = dir.path().join("copy.pb");
        let mut reported = Vec::new();
        let copied = super::copy_atomically(&from, &to, &mut |n| reported.push(n)).unwrap();
        assert_eq!(copied, bytes.len() as u64);
        assert_eq!(reported, vec![super::COPY_PIECE, 12345]);
        assert!(std::fs::read(&to).unwrap() == bytes);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_copy_of_a_missing_or_special_file_names_it_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("copy.pb");
        for from in [dir.path().join("missing.pb"), dir.path().to_path_buf()] {
            let error = super::copy_atomically(&from, &to, &mut |_| {}).unwrap_err();
            assert_eq!(error.path(), from);
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }

    #[test]
    fn a_cancelled_thread_never_persists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let token = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        super::set_cancel_token(Some(token.clone()));
        let tmp = super::TempPath::new(&path);
        std::fs::write(tmp.path(), b"partial").unwrap();
        token.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(tmp.persist().is_err());
        let written = super::write_atomically(&path, |out| {
            std::io::Write::write_all(out, b"x").map_err(crate::io_err(&path))
        });
        assert!(written.is_err());
        super::set_cancel_token(None);
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    use std::io::Write;

    use super::*;
    use crate::temp_name::{temp_prefix, TEMP_MARK};
    use crate::{io_err, remove_stale_temporaries_of, take_removed_stale, MAX_FILE_NAME};

    /// `remove_temporaries` removes every temporary in progress in the process, those of the
    /// other tests too: the tests that write take turns.
    static TURN: Mutex<()> = Mutex::new(());

    fn turn() -> std::sync::MutexGuard<'static, ()> {
        TURN.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn failed_write_leaves_nothing_behind() {
        let _turn = turn();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.pb");
        fs::write(&target, b"old").unwrap();
        let err = write_atomically(&target, |w| {
            w.write_all(b"partial").unwrap();
            Err::<(), _>(IoError::os("test", std::io::Error::other("interrupted")))
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&target).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn successful_write_replaces_target() {
        let _turn = turn();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.pb");
        write_atomically(&target, |w| w.write_all(b"new").map_err(io_err(&target))).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn temp_dir_is_removed_unless_persisted() {
        let _turn = turn();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        {
            let tmp = TempPath::new(&target);
            fs::create_dir(tmp.path()).unwrap();
            fs::write(tmp.path().join("f"), b"x").unwrap();
        }
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        let tmp = TempPath::new(&target);
        fs::create_dir(tmp.path()).unwrap();
        tmp.persist().unwrap();
        assert!(target.is_dir());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn long_target_names_get_temporaries_within_the_limit() {
        let _turn = turn();
        let dir = tempfile::tempdir().unwrap();
        for len in (200..=MAX_FILE_NAME).step_by(3).chain([226, 227, 254, 255]) {
            let name = "n".repeat(len);
            let target = dir.path().join(&name);
            let tmp = temp_path_for(&target);
            let tmp_len = tmp.file_name().unwrap().len();
            assert!(tmp_len <= MAX_FILE_NAME, "{len}: {tmp_len}");
            // Shortened names stay recognisable and differ between targets.
            assert!(tmp
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".nnnn"));
            write_atomically(&target, |w| w.write_all(b"x").map_err(io_err(&target))).unwrap();
            assert_eq!(fs::read(&target).unwrap(), b"x", "{len}");
            fs::remove_file(&target).unwrap();
        }
        let a = temp_prefix(&dir.path().join(format!("{}a", "n".repeat(250))));
        let b = temp_prefix(&dir.path().join(format!("{}b", "n".repeat(250))));
        assert_ne!(a, b);
        // Multi-byte names are cut at a character boundary.
        let name = "é".repeat(127); // 254 bytes
        let target = dir.path().join(&name);
        let tmp = temp_path_for(&target);
        assert!(tmp.file_name().unwrap().to_str().is_some());
        assert!(tmp.file_name().unwrap().len() <= MAX_FILE_NAME);
        write_atomically(&target, |w| w.write_all(b"y").map_err(io_err(&target))).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"y");
    }

    /// The PID of a process that has exited.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn one_listing_removes_the_stale_temporaries_of_every_target_and_nothing_else() {
        let _turn = turn();
        if !Path::new("/proc/self").exists() {
            return; // liveness is only known through /proc
        }
        let dir = tempfile::tempdir().unwrap();
        let dead = dead_pid();
        let stale = |target: &Path, pid: u32| {
            let prefix = String::from_utf8(temp_prefix(target)).unwrap();
            dir.path().join(format!("{prefix}{pid}-123"))
        };
        let targets: Vec<PathBuf> = (0..3)
            .map(|i| dir.path().join(format!("ckpt.data-0000{i}-of-00003")))
            .collect();
        for t in &targets {
            fs::write(stale(t, dead), b"x").unwrap();
        }
        let other = stale(&dir.path().join("other"), dead);
        let live = stale(&targets[0], 1); // init is alive
        for p in [&other, &live] {
            fs::write(p, b"keep").unwrap();
        }
        let _ = take_removed_stale();
        let mut removed = remove_stale_temporaries_of(&targets);
        removed.sort();
        let expected: Vec<PathBuf> = targets.iter().map(|t| stale(t, dead)).collect();
        assert_eq!(removed, expected);
        let mut taken = take_removed_stale();
        taken.sort();
        assert_eq!(taken, removed);
        assert!(other.exists() && live.exists());
    }

    #[test]
    fn stale_temporaries_of_dead_writers_are_removed_and_reported() {
        let _turn = turn();
        if !Path::new("/proc/self").exists() {
            return; // liveness is only known through /proc
        }
        let dir = tempfile::tempdir().unwrap();
        let dead = dead_pid();
        for name in ["out.pb", &"m".repeat(240)] {
            let target = dir.path().join(name);
            let prefix = String::from_utf8(temp_prefix(&target)).unwrap();
            let stale_file = dir.path().join(format!("{prefix}{dead}-123"));
            let stale_dir = dir.path().join(format!("{prefix}{dead}-456"));
            let live = dir.path().join(format!("{prefix}1-789")); // init is alive
            let other = dir.path().join(format!(".other{TEMP_MARK}{dead}-1"));
            let not_ours = dir.path().join(format!("{prefix}{dead}-12x"));
            fs::write(&stale_file, b"partial").unwrap();
            fs::create_dir(&stale_dir).unwrap();
            fs::write(stale_dir.join("variables.data"), b"partial").unwrap();
            for p in [&live, &other, &not_ours] {
                fs::write(p, b"keep").unwrap();
            }
            let _ = take_removed_stale();
            write_atomically(&target, |w| w.write_all(b"new").map_err(io_err(&target))).unwrap();
            assert_eq!(fs::read(&target).unwrap(), b"new");
            assert!(!stale_file.exists() && !stale_dir.exists());
            assert!(live.exists() && other.exists() && not_ours.exists());
            let mut removed = take_removed_stale();
            removed.sort();
            let mut expected = vec![stale_file.clone(), stale_dir.clone()];
            expected.sort();
            assert_eq!(removed, expected);
            // A TempPath reports them too.
            fs::write(&stale_file, b"partial").unwrap();
            let tmp = TempPath::new(&target);
            assert_eq!(tmp.removed_stale(), std::slice::from_ref(&stale_file));
            for p in [&live, &other, &not_ours] {
                fs::remove_file(p).unwrap();
            }
        }
    }

    #[test]
    fn a_removed_temporary_is_never_created_again_nor_persisted() {
        let _turn = turn();
        let dir = tempfile::tempdir().unwrap();
        let tmp = TempPath::new(&dir.path().join("out"));
        tmp.create_dir().unwrap();
        fs::write(tmp.path().join("saved_model.pb"), b"partial").unwrap();
        remove_temporaries();
        // The writer goes on after the interrupt: through its old path nothing can be made.
        assert!(fs::write(tmp.path().join("fingerprint.pb"), b"x").is_err());
        let refused = tmp.create_dir().unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::Interrupted);
        assert!(tmp.persist().is_err());
        // Removed before it was created: creating it is refused.
        let tmp = TempPath::new(&dir.path().join("file"));
        remove_temporaries();
        assert!(tmp.create_file().is_err());
        drop(tmp);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_directory_filled_while_it_is_removed_is_removed_whole() {
        let _turn = turn();
        let dir = tempfile::tempdir().unwrap();
        let tmp = TempPath::new(&dir.path().join("out"));
        tmp.create_dir().unwrap();
        let inside = tmp.path().to_path_buf();
        // A writer that keeps adding files until it can no longer (or gives up after 10 s or
        // 100,000 files, which is the failure this test looks for: the directory outlived its
        // removal).
        let writer = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let mut made = 0;
            while fs::write(inside.join(format!("part-{made}")), b"x").is_ok() {
                made += 1;
                if made >= 100_000 || std::time::Instant::now() > deadline {
                    return (made, false);
                }
            }
            (made, true)
        });
        while fs::read_dir(tmp.path()).map_or(0, |d| d.count()) < 100 {
            std::thread::yield_now();
        }
        remove_temporaries();
        let (made, stopped) = writer.join().unwrap();
        assert!(made >= 100);
        assert!(
            stopped,
            "the writer could still add files after the removal"
        );
        assert!(!tmp.path().exists());
        drop(tmp);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn remove_temporaries_removes_what_is_in_progress() {
        let _turn = turn();
        let dir = tempfile::tempdir().unwrap();
        let tmp = TempPath::new(&dir.path().join("x"));
        fs::write(tmp.path(), b"partial").unwrap();
        remove_temporaries();
        assert!(!tmp.path().exists());
    }
}
